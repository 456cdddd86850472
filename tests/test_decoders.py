"""The decoder contract: decode's scores, exact n-best against brute-force enumeration, registry-built."""

from __future__ import annotations

import itertools

import pytest
import torch

from seqlab.decoders import DECODERS, CRFDecoderConfig, NoExactNBest, SoftmaxDecoderConfig, TagSet
from seqlab.decoders.base import Decoder
from seqlab.nn.context import Context

TAGS = TagSet(["O", "B-X", "I-X", "E-X", "S-X"], "BIOES")


def _inputs(seed: int, batch: int = 3, seq: int = 4, dim: int = 6):
    gen = torch.Generator().manual_seed(seed)
    features = torch.randn(batch, seq, dim, generator=gen)
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[1, 2:] = False  # a shorter sentence
    mask[2, 1:] = False  # a one-token sentence
    return features, mask, Context.of(mask)


def _softmax_brute(logp: torch.Tensor, n: int) -> list[tuple[list[int], float]]:
    """Every label sequence of a sentence of n tokens with its summed log-probability, best first."""
    seqs = [
        (list(y), float(sum(logp[t, y[t]] for t in range(n))))
        for y in itertools.product(range(logp.shape[-1]), repeat=n)
    ]
    return sorted(seqs, key=lambda s: -s[1])


@pytest.mark.parametrize("seed", range(3))
def test_softmax_nbest_is_exact(seed):
    torch.manual_seed(seed)
    dec = SoftmaxDecoderConfig().build(6, TAGS, {})
    features, mask, ctx = _inputs(seed)
    paths = dec.nbest(features, mask, ctx, 7)
    decoded = dec.decode(features, mask, ctx)
    logp = dec.proj(features).log_softmax(-1).detach()
    for b, n in enumerate(mask.sum(1).tolist()):
        want = _softmax_brute(logp[b], n)[:7]
        assert [p.score for p in paths[b]] == pytest.approx([s for _, s in want], abs=1e-5)
        assert paths[b][0].tags == decoded.tags[b, :n].tolist()
        assert decoded.scores[b].item() == pytest.approx(want[0][1], abs=1e-5)
        assert len({tuple(p.tags) for p in paths[b]}) == len(paths[b])


def test_crf_decode_score_is_the_path_score_and_nbest_head():
    torch.manual_seed(0)
    dec = CRFDecoderConfig().build(6, TAGS, {})
    features, mask, ctx = _inputs(0)
    decoded = dec.decode(features, mask, ctx)
    emissions = dec.proj(features)
    torch.testing.assert_close(decoded.scores, dec.crf.score(emissions, decoded.tags, mask))
    paths = dec.nbest(features, mask, ctx, 3)
    for b, n in enumerate(mask.sum(1).tolist()):
        assert paths[b][0].tags == decoded.tags[b, :n].tolist()
        assert paths[b][0].score == pytest.approx(decoded.scores[b].item(), abs=1e-4)


def test_default_nbest_gives_one_path_or_refuses():
    class OneBest(Decoder):
        def decode(self, features, mask, ctx):
            return SoftmaxDecoderConfig().build(6, TAGS, {}).decode(features, mask, ctx)

    features, mask, ctx = _inputs(1)
    assert [len(p) for p in OneBest().nbest(features, mask, ctx, 1)] == [1, 1, 1]
    with pytest.raises(NoExactNBest, match="exact 2-best"):
        OneBest().nbest(features, mask, ctx, 2)


def test_registry_builds_decoders_from_mappings():
    assert {"crf", "softmax"} <= set(DECODERS.names())
    cfg = DECODERS.validate({"type": "crf", "constrained": False})
    assert isinstance(cfg, CRFDecoderConfig) and not cfg.constrained
    assert not cfg.build(6, TAGS, {}).crf.transition_penalty.any()
    assert CRFDecoderConfig().build(6, TAGS, {}).crf.transition_penalty.any()  # BIOES constraints
