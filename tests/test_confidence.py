"""Confidence of predictions: per-token marginals and per-span probabilities, checked against brute-force
enumeration of every label sequence on tiny inputs, and through the tagger."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from seqlab import Tagger
from seqlab.data.readers import read_conll
from seqlab.decoders.softmax import SoftmaxDecoder
from seqlab.nn.context import Context
from tests.test_crf import make_crf, rand_emissions


@pytest.fixture(scope="module")
def trained(shared_tiny_model):
    path, model = shared_tiny_model
    return Tagger.load(model), read_conll(path, label_column=None)


def brute_posteriors(crf, emissions, n):
    """All label sequences of the first n tokens of one sentence with their posterior probabilities."""
    k = emissions.shape[-1]
    seqs = list(itertools.product(range(k), repeat=n))
    tags = torch.tensor(seqs)
    with torch.no_grad():
        scores = crf.score(emissions[:, :n].expand(len(seqs), -1, -1), tags, torch.ones(len(seqs), n, dtype=torch.bool))
    return seqs, torch.softmax(scores.double(), 0)


@pytest.mark.parametrize("constrained", [False, True])
def test_span_probability_equals_the_sum_over_all_sequences_containing_it(constrained):
    crf = make_crf(4, seed=3, constrained=constrained)
    emissions = rand_emissions(2, 5, 4, seed=5)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])
    tags = torch.tensor([[0, 1, 2, 3, 0], [2, 2, 1, 0, 0]])
    segments = [[(0, 1), (1, 4), (2, 5), (0, 5)], [(0, 2), (2, 3), (0, 3)]]
    probs = crf.segment_probs(emissions, mask, tags, segments)
    marginals = crf.marginals(emissions, mask).detach()
    for row, n in enumerate([5, 3]):
        seqs, post = brute_posteriors(crf, emissions[row : row + 1], n)
        path = tags[row].tolist()
        for (a, b), p in zip(segments[row], probs[row]):
            expected = sum(float(q) for s, q in zip(seqs, post) if list(s[a:b]) == path[a:b])
            assert p == pytest.approx(expected, abs=1e-5)
        for t in range(n):
            expected = sum(float(q) for s, q in zip(seqs, post) if s[t] == path[t])
            assert float(marginals[row, t, path[t]]) == pytest.approx(expected, abs=1e-5)
    tokens, spans = crf.path_confidence(emissions, mask, tags, segments)  # one forward-backward for both
    for row, n in enumerate([5, 3]):
        assert spans[row] == pytest.approx(probs[row], abs=1e-6)
        assert tokens[row] == pytest.approx(
            marginals[row, :n].gather(1, tags[row, :n, None]).squeeze(1).tolist(), abs=1e-6
        )


def test_softmax_span_probability_is_exact_for_independent_tokens():
    torch.manual_seed(0)
    dec = SoftmaxDecoder(6, 3)
    feats, mask = torch.randn(1, 4, 6), torch.ones(1, 4, dtype=torch.bool)
    tags = torch.tensor([[0, 2, 2, 1]])
    conf = dec.confidence(feats, mask, Context.of(mask), tags, [[(1, 3), (0, 4)]])
    p = dec.marginals(feats, mask, Context.of(mask))[0].double()
    total = {seg: 0.0 for seg in [(1, 3), (0, 4)]}
    for s in itertools.product(range(3), repeat=4):  # enumerate: P(s) = prod_t p_t(s_t)
        q = math.prod(float(p[t, s[t]]) for t in range(4))
        for a, b in total:
            if list(s[a:b]) == tags[0, a:b].tolist():
                total[(a, b)] += q
    assert conf.spans[0] == pytest.approx([total[(1, 3)], total[(0, 4)]], abs=1e-6)
    assert conf.kind == "softmax-marginal" and len(conf.tokens[0]) == 4


def test_tagger_confidence_is_a_probability_below_its_tokens(trained):
    tagger, sentences = trained
    preds = tagger.predict(sentences[:10], confidence=True)
    one_by_one = tagger.predict(sentences[:10], confidence=True, batch_size=1)
    for pred, again in zip(preds, one_by_one):
        assert pred.confidence_kind == "crf-marginal"
        assert len(pred.token_confidence) == len(pred.tokens)
        assert pred.spans and all(0 < s.confidence <= 1 for s in pred.spans)
        for span in pred.spans:  # a joint probability never exceeds a marginal of its parts
            assert span.confidence <= min(pred.token_confidence[span.start : span.end]) + 1e-6
        assert again.token_confidence == pytest.approx(pred.token_confidence, abs=1e-5)
        assert [s.confidence for s in again.spans] == pytest.approx([s.confidence for s in pred.spans], abs=1e-5)
    assert tagger.predict(sentences[:1])[0].token_confidence is None  # only when asked for


def test_prediction_to_dict_is_asdict(trained):
    """Prediction.to_dict builds what dataclasses.asdict gives (spans, n-best, confidences), without sharing
    the prediction's lists."""
    from dataclasses import asdict

    tagger, sentences = trained
    for pred in tagger.predict(sentences[:5], nbest=2, confidence=True, explain=True):
        d = pred.to_dict()
        assert d == asdict(pred)
        d["tags"].append("X")
        assert len(pred.tags) == len(d["tags"]) - 1
