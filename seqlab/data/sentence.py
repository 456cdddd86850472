"""The unit of data: one sentence with optional gold labels."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Sentence:
    """A tokenized sentence.

    ``labels`` is None for unlabeled text. ``source`` and ``line`` locate the sentence's first token
    in its file (1-based) so that later errors can name it.
    """

    tokens: list[str]
    labels: list[str] | None = None
    source: str = "<memory>"
    line: int = 0
    extra: dict = field(default_factory=dict)  # other columns, e.g. {"pos": [...]} kept for writing back

    def __len__(self) -> int:
        return len(self.tokens)
