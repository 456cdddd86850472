"""The unit of data: one sentence with optional gold labels, and the sentences around it."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from seqlab.errors import SeqlabError


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
    ``breaks`` counts those just before it (since the previous sentence), for writing them back.
    """

    tokens: list[str]
    labels: list[str] | None = None
    source: str = "<memory>"
    line: int = 0
    extra: dict = field(default_factory=dict)  # other columns, e.g. {"pos": [...]} kept for writing back
    neighbours: Neighbours | None = None  # set by link_neighbours when a feature reads across sentences
    document: int = 0
    breaks: int = 0

    def __len__(self) -> int:
        return len(self.tokens)


def link_neighbours(sentences: Sequence[Sentence], k: int, targets: range | None = None) -> None:
    """Give each sentence the tokens of the ``k`` sentences on each side of it in ``sentences`` (references to
    their token lists, not copies), replacing any it had; ``k == 0`` leaves the sentences as they are.
    ``targets``: link only the sentences at these indices (the others are context only, left as they are).

    Neighbours come from the same document only: the run of consecutive sentences with the same ``source``
    and ``document``."""
    if k <= 0:
        return
    tokens = [s.tokens for s in sentences]
    keys = [(s.source, s.document) for s in sentences]
    for i in range(len(sentences)) if targets is None else targets:
        start = i  # where the sentence's document starts, looking at most k sentences back
        while start > max(0, i - k) and keys[start - 1] == keys[i]:
            start -= 1
        end = i + 1  # where it ends, looking at most k sentences ahead
        while end < min(len(sentences), i + 1 + k) and keys[end] == keys[i]:
            end += 1
        sentences[i].neighbours = Neighbours(tuple(tokens[start:i]), tuple(tokens[i + 1 : end]))


def linked_chunks(sentences: Iterable[Sentence], size: int, k: int) -> Iterator[list[Sentence]]:
    """Lists of ``size`` consecutive sentences (the last one shorter), read lazily, each sentence linked to the
    ``k`` sentences on each side of it in the whole stream (as :func:`link_neighbours` over all of them would;
    ``k`` sentences are read ahead), so that what a chunk's sentences read does not depend on ``size``. A
    sentence is never changed after its chunk is yielded.

    An error that reading raises (a bad line) comes after the whole chunks read before it, as it would without
    the read-ahead; their context ends where the error is."""
    errors: list[SeqlabError] = []  # the reading error, once one came: the stream ends there

    def up_to_an_error() -> Iterator[Sentence]:
        try:
            yield from sentences
        except SeqlabError as err:
            errors.append(err)

    it = up_to_an_error()
    before: list[Sentence] = []  # the last k sentences of the chunks yielded
    buffer = list(itertools.islice(it, size + k))  # the next chunk and the k sentences after it
    while buffer and (not errors or len(buffer) >= size):
        part = buffer[:size]
        link_neighbours(before + buffer, k, range(len(before), len(before) + len(part)))
        yield part
        before = (before + part)[-k:] if k else []
        ahead = buffer[size:]
        buffer = ahead + list(itertools.islice(it, size + k - len(ahead)))
    if errors:
        raise errors[0]
