"""The probabilities of the decoded tags and spans (``predict(..., confidence=True)``), from the decoder."""

from __future__ import annotations

from seqlab.data.schemes import get_spans
from seqlab.decoders.base import NoExactConfidence
from seqlab.nn.context import Context


def confidence(decoder, itos: list[str], scheme: str, batch, out, paths: list[list[int]]):
    """(kind, per-token probabilities per row, {(start, end): probability} per row) of the decoded ``paths``
    (tag ids of ``itos``, in the training ``scheme``) of ``batch``, whose network output is ``out``; (reason,
    None, None) when the decoder has none."""
    segments = [
        [] if scheme == "none" else [(a, b) for _, a, b in get_spans([itos[i] for i in p], scheme)] for p in paths
    ]
    ctx = Context(batch.mask, batch.lengths, batch.features, out.published)
    try:
        conf = decoder.confidence(out.features, batch.mask, ctx, out.decoded.tags, segments)
    except NoExactConfidence as err:
        return f"unavailable: {err}", None, None
    return conf.kind, conf.tokens, [dict(zip(segs, probs)) for segs, probs in zip(segments, conf.spans)]
