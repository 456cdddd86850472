"""The unit of data: one sentence with optional gold labels, and the sentences around it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Neighbours:
    """The tokens of the sentences before (nearest last) and after (nearest first) a sentence, as they came
    together: in one file, one call of ``predict``, one request. Features that read across sentences use them
    (a transformer given the text around the sentence, as a document's context)."""

    before: tuple[list[str], ...] = ()
    after: tuple[list[str], ...] = ()


@dataclass
class Sentence:
    """A tokenized sentence.

    ``labels`` is None for unlabeled text. ``source`` and ``line`` locate the sentence's first token
    in its file (1-based) so that later errors can name it. ``document`` counts the document breaks
    (``-DOCSTART-`` lines) before it in its file: sentences read across sentences only within one document.
    """

    tokens: list[str]
    labels: list[str] | None = None
    source: str = "<memory>"
    line: int = 0
    extra: dict = field(default_factory=dict)  # other columns, e.g. {"pos": [...]} kept for writing back
    neighbours: Neighbours | None = None  # set by link_neighbours when a feature reads across sentences
    document: int = 0

    def __len__(self) -> int:
        return len(self.tokens)


def link_neighbours(sentences: Sequence[Sentence], k: int) -> None:
    """Give each sentence the tokens of the ``k`` sentences on each side of it in ``sentences`` (references to
    their token lists, not copies), replacing any it had; ``k == 0`` leaves the sentences as they are.

    Neighbours come from the same document only: the run of consecutive sentences with the same ``source``
    and ``document``."""
    if k <= 0:
        return
    tokens = [s.tokens for s in sentences]
    keys = [(s.source, s.document) for s in sentences]
    start = 0  # where the current sentence's document starts in ``sentences``
    for i, s in enumerate(sentences):
        if i and keys[i] != keys[i - 1]:
            start = i
        end = i + 1  # where its document ends, looking at most k sentences ahead
        while end < min(len(sentences), i + 1 + k) and keys[end] == keys[i]:
            end += 1
        s.neighbours = Neighbours(tuple(tokens[max(start, i - k) : i]), tuple(tokens[i + 1 : end]))
