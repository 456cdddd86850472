"""Cutting long sentences into pieces of at most ``max_length`` tokens.

Attention costs grow with the square of a sentence's length (a lattice's, even more), so training
can cap it (``train.max_length``) and inference can too (``predict --max-length``). Nothing is dropped
or truncated: every token lands in exactly one piece. A cut goes, in order of preference, after the
last sentence-internal punctuation mark of the window, then at the last position no chunk crosses,
then at the window's end. With gold labels, cuts never split a chunk when any other cut is possible.
"""

from __future__ import annotations

from collections.abc import Sequence

from seqlab.data.schemes import get_spans
from seqlab.data.sentence import Sentence

BREAKS = frozenset("。！？；，、：,.!?;:")  # tokens after which a cut reads naturally


def cut_points(
    tokens: Sequence[str], max_length: int, labels: Sequence[str] | None = None, scheme: str = "none"
) -> list[int]:
    """Token offsets where the pieces start (the first piece's 0 not included); [] when no cut is
    needed."""
    n = len(tokens)
    if n <= max_length:
        return []
    crossed = [False] * (n + 1)  # crossed[c]: a gold chunk covers both c - 1 and c
    if labels is not None and scheme != "none":
        for _, start, end in get_spans(list(labels), scheme):
            for c in range(start + 1, end):
                crossed[c] = True
    cuts, start = [], 0
    while n - start > max_length:
        window = range(start + max_length, start, -1)  # candidate starts of the next piece, last first
        safe = [c for c in window if not crossed[c]]
        after_break = [c for c in safe if tokens[c - 1] in BREAKS]
        cut = after_break[0] if after_break else safe[0] if safe else start + max_length
        cuts.append(cut)
        start = cut
    return cuts


def split_sentence(sentence: Sentence, cuts: Sequence[int]) -> list[Sentence]:
    """The pieces of ``sentence`` that start at 0 and at each of ``cuts``; each keeps its file line."""
    bounds = [0, *cuts, len(sentence.tokens)]
    out = []
    for a, b in zip(bounds, bounds[1:]):
        labels = None if sentence.labels is None else sentence.labels[a:b]
        extra = {k: v[a:b] for k, v in sentence.extra.items()}
        piece = Sentence(
            sentence.tokens[a:b], labels, sentence.source, sentence.line + a, extra, document=sentence.document
        )
        piece.neighbours = sentence.neighbours  # each piece reads the whole sentence's context
        piece.breaks = sentence.breaks if a == 0 else 0
        out.append(piece)
    return out


def split_long(sentences: Sequence[Sentence], max_length: int, scheme: str) -> tuple[list[Sentence], int]:
    """Every sentence, the long ones replaced by their pieces; and how many were split."""
    out: list[Sentence] = []
    split = 0
    for s in sentences:
        cuts = cut_points(s.tokens, max_length, s.labels, scheme)
        if cuts:
            split += 1
            out.extend(split_sentence(s, cuts))
        else:
            out.append(s)
    return out, split
