"""Sentences longer than ``max_length`` tokens tagged in pieces (``predict``'s and ``evaluate``'s
``--max-length``), the pieces' tags joined back into one row per sentence."""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence

from seqlab.data.sentence import Sentence
from seqlab.data.splitting import cut_points, split_sentence
from seqlab.errors import SeqlabError
from seqlab.runtime.cost import OverBudget
from seqlab.tagging import inference
from seqlab.tagging.results import Row

log = logging.getLogger("seqlab")


def run_capped(
    tagger,
    sentences: Sequence[Sentence],
    max_length: int | None,
    batch_size: int | None = None,
    nbest: int = 0,
    explain: bool = False,
    ablate: Collection[str] = (),
    confidence: bool = False,
    link: bool = True,
) -> list[Row]:
    """:func:`seqlab.tagging.inference.run` on whole sentences, or on pieces of at most ``max_length`` tokens (by
    default ``tagger.max_length``) whose tags are joined back (a split sentence's row has ``split_at`` set, and no
    n-best list or explanation: those do not join)."""
    if max_length is None:
        max_length = tagger.max_length
    if max_length is None:
        return inference.run(tagger, sentences, batch_size, nbest, explain, ablate, confidence, link)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise SeqlabError(f"--max-length: expected a positive integer, got {max_length!r}")
    cuts = [cut_points(s.tokens, max_length) for s in sentences]
    pieces = [p for s, c in zip(sentences, cuts) for p in (split_sentence(s, c) if c else [s])]
    try:
        piece_rows = iter(inference.run(tagger, pieces, batch_size, nbest, explain, ablate, confidence, link))
    except OverBudget as err:  # name the sentence of the call, not the piece
        if err.index is not None:
            err.index = [k for k, c in enumerate(cuts) for _ in range(len(c) + 1)][err.index]
        raise
    rows = []
    for s, c in zip(sentences, cuts):
        if not c:
            rows.append(next(piece_rows))
            continue
        log.warning(
            "%s:%d: sentence of %d tokens split at %s for tagging (max length %d)",
            s.source,
            s.line,
            len(s.tokens),
            ", ".join(map(str, c)),
            max_length,
        )
        joined = Row(split_at=c)
        for offset in [0, *c]:
            piece = next(piece_rows)
            joined.tags += piece.tags
            joined.confidence_kind = piece.confidence_kind
            if piece.token_conf is not None:
                joined.token_conf = (joined.token_conf or []) + piece.token_conf
                joined.span_conf = {
                    **(joined.span_conf or {}),
                    **{(a + offset, b + offset): p for (a, b), p in piece.span_conf.items()},
                }
        rows.append(joined)
    return rows
