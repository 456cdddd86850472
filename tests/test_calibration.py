"""Temperature scaling: tempered CRF and softmax probabilities against brute force, the fitted temperature
against a grid, the expected calibration error against a hand computation, and `seqlab calibrate`."""

from __future__ import annotations

import json
import math

import pytest
import torch
import torch.nn.functional as F

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.readers import read_conll
from seqlab.decoders.softmax import SoftmaxDecoder
from seqlab.errors import SeqlabError
from seqlab.evaluation.calibration import Likelihood, expected_calibration_error, fit_temperature
from seqlab.nn.context import Context
from tests.conftest import tiny_config
from tests.test_cli import assert_user_error, run
from tests.test_confidence import brute_posteriors
from tests.test_crf import make_crf, rand_emissions


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_tempered_crf_is_the_brute_force_distribution_of_scores_over_t(temperature):
    crf = make_crf(3, seed=2, constrained=True)
    emissions = rand_emissions(1, 4, 3, seed=7)
    mask = torch.ones(1, 4, dtype=torch.bool)
    seqs, plain = brute_posteriors(crf, emissions, 4)
    gold_seq = seqs[int(plain.argsort()[-3])]  # an allowed sequence, not the best
    gold = torch.tensor([gold_seq])
    with torch.no_grad():
        scores = crf.score(emissions.expand(len(seqs), -1, -1), torch.tensor(seqs), mask.expand(len(seqs), -1))
    tempered = torch.softmax(scores.double() / temperature, 0)  # p_T(y | x) for every y
    assert not torch.allclose(tempered, plain)
    marginals = crf.marginals(emissions, mask, temperature).detach()
    for t in range(4):
        for j in range(3):
            want = sum(float(q) for s, q in zip(seqs, tempered) if s[t] == j)
            assert float(marginals[0, t, j]) == pytest.approx(want, abs=1e-5)
    _tokens, spans = crf.path_confidence(emissions, mask, gold, [[(1, 3), (0, 4)]], temperature)
    for (a, b), p in zip([(1, 3), (0, 4)], spans[0]):
        want = sum(float(q) for s, q in zip(seqs, tempered) if list(s[a:b]) == gold[0, a:b].tolist())
        assert p == pytest.approx(want, abs=1e-5)
    nll = float(crf.nll(emissions, gold, mask, temperature).detach())
    assert nll == pytest.approx(-math.log(float(tempered[seqs.index(gold_seq)])), abs=1e-5)
    assert crf.viterbi_tags(emissions, mask).tolist() == [list(seqs[int(tempered.argmax())])]  # same best path


def test_tempered_softmax_divides_the_logits():
    torch.manual_seed(0)
    dec = SoftmaxDecoder(6, 3)
    feats, mask = torch.randn(2, 4, 6), torch.tensor([[True] * 4, [True] * 2 + [False] * 2])
    tags = torch.tensor([[0, 2, 2, 1], [1, 0, 0, 0]])
    logits = dec.proj(feats).detach() / 1.7
    want = (F.cross_entropy(logits.transpose(1, 2), tags, reduction="none") * mask).sum(1)
    torch.testing.assert_close(dec.scaled_nll(feats, tags, mask, Context.of(mask), 1.7).detach(), want)
    dec.temperature = 1.7
    torch.testing.assert_close(
        dec.marginals(feats, mask, Context.of(mask)).detach(), logits.softmax(-1) * mask.unsqueeze(-1)
    )


def test_expected_calibration_error_by_hand():
    pairs = [(0.95, True), (0.95, False), (0.92, True), (0.25, True), (0.0, False), (1.0, True)]
    ece = expected_calibration_error(pairs, bins=10)
    # bin 0.9-1.0: 4 items, mean confidence 0.955, accuracy 0.75; bin 0.2-0.3: 0.25 vs 1; bin 0.0-0.1: 0 vs 0
    assert ece.value == pytest.approx(4 / 6 * abs(0.955 - 0.75) + 1 / 6 * abs(0.25 - 1.0))
    assert [b.count for b in ece.bins] == [1, 0, 1, 0, 0, 0, 0, 0, 0, 4] and ece.items == 6


def test_fitted_temperature_minimises_the_likelihood_and_keeps_the_tags(shared_tiny_model, tmp_path):
    path, model = shared_tiny_model
    tagger = Tagger.load(model)
    sentences = read_conll(path, label_column=2)[:12]
    before = tagger.predict(sentences, confidence=True)
    fit = fit_temperature(tagger, sentences)
    nll = Likelihood(tagger, sentences)
    grid = [nll(math.exp(u / 10)) for u in range(-29, 30)]  # T from 0.055 to 18
    assert fit.nll_after <= min(grid) + 1e-6 and fit.nll_after <= fit.nll_before
    assert fit.previous == 1.0 and fit.sentences == 12 and fit.temperature != pytest.approx(1.0, abs=1e-3)
    tagger.set_temperature(fit.temperature)
    after = tagger.predict(sentences, confidence=True)
    assert [p.tags for p in after] == [p.tags for p in before]
    assert [p.token_confidence for p in after] != [p.token_confidence for p in before]
    tagger.save(tmp_path / "calibrated")
    again = Tagger.load(tmp_path / "calibrated")
    assert again.net.decoder.temperature == fit.temperature
    assert [p.to_dict() for p in again.predict(sentences, confidence=True)] == [p.to_dict() for p in after]


def test_calibrate_command_saves_the_temperature(shared_tiny_model, tmp_path):
    path, model = shared_tiny_model
    out = tmp_path / "calibrated"
    proc = run("calibrate", model, path, "--out", out, "--bins", "5")
    assert proc.returncode == 0, proc.stderr
    assert "temperature 1 -> " in proc.stdout and "spans (" in proc.stdout
    assert "expected calibration error" in proc.stdout
    saved = json.loads((out / "config.json").read_text())["config"]["model"]["decoder"]["temperature"]
    assert saved != 1.0 and f"-> {saved:.4g}" in proc.stdout
    assert json.loads((model / "config.json").read_text())["config"]["model"]["decoder"]["temperature"] == 1.0
    assert json.loads(run("info", out).stdout)["temperature"] == saved


def test_calibrate_errors(shared_tiny_model, tmp_path):
    path, model = shared_tiny_model
    unlabelled = tmp_path / "raw.txt"
    unlabelled.write_text("Confidence NN\nis VBZ\n")  # no chunk column
    assert_user_error(run("calibrate", model, unlabelled, "--out", tmp_path / "o"), "raw.txt:1")
    assert_user_error(run("calibrate", model, path, "--bins", "1"), "--bins")
    assert_user_error(run("calibrate", tmp_path / "nothing", path), "nothing")
    raw = tiny_config(path).model_dump(mode="json")
    raw["model"]["decoder"]["temperature"] = 0
    with pytest.raises(SeqlabError, match="model.decoder.temperature"):
        config_from_dict(raw)
    raw["model"]["decoder"] = {"type": "label_dt", "hidden": 8, "label_dim": 4, "transitions": 1}
    tagger = Tagger.build(config_from_dict(raw), read_conll(path, label_column=2), "BIO", [])
    with pytest.raises(SeqlabError, match="no probabilities to calibrate"):
        tagger.set_temperature(1.5)


def test_calibrate_a_softmax_tagger_of_plain_labels(tmp_path_factory):
    from tests.conftest import train_tiny

    def pos_config(path):
        raw = tiny_config(path).model_dump(mode="json")
        raw["task"], raw["data"]["label_column"], raw["data"]["scheme"] = "pos", 1, "none"
        raw["model"]["decoder"] = {"type": "softmax"}
        raw["train"]["max_epochs"] = 4
        return config_from_dict(raw)

    path, run_dir, _ = train_tiny(tmp_path_factory, "calibrate-pos", pos_config)
    proc = run("calibrate", run_dir / "model", path)  # in place
    assert proc.returncode == 0, proc.stderr
    assert "tokens (" in proc.stdout and "spans (" not in proc.stdout  # plain labels have no spans
    tagger = Tagger.load(run_dir / "model")
    assert tagger.net.decoder.temperature == tagger.config.model.decoder.temperature != 1.0
