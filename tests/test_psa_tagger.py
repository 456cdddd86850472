"""The PSA architecture of the paper's Figure 2 as a whole tagger: learns, saves, loads, explains."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from seqlab import Tagger, train
from seqlab.config import config_from_dict
from seqlab.data.readers import read_conll
from tests.conftest import (
    SAMPLE,
    assert_same_on_two_threads,
    assert_save_load_identical,
    first_sentences,
    tiny_config,
    train_tiny,
)

ROOT = Path(__file__).resolve().parents[1]


def psa_config(path, **fusion):
    raw = tiny_config(path).model_dump(mode="json")
    layer = {"type": "psa_fusion", "window": 4, "attention_dropout": 0.0, **fusion}
    raw["model"]["encoders"] = [layer, {"type": "bilstm", "hidden": 32, "dropout": 0.0}, layer]
    return config_from_dict(raw)


@pytest.fixture(scope="module")
def psa_run(tmp_path_factory):
    return train_tiny(tmp_path_factory, "psa", psa_config)


def test_psa_overfits_20_sentences(psa_run):
    assert psa_run[2].dev["f1"] > 99.0


def test_psa_save_load_identical(psa_run, tmp_path):
    path, run, _ = psa_run
    assert_save_load_identical(run / "model", path, tmp_path)


def test_explain_gives_attention_and_gates(psa_run):
    _, run, _ = psa_run
    pred = Tagger.load(run / "model").predict(["The dollar also moved higher in Tokyo ."], explain=True)[0]
    layers = pred.explanation
    assert [x.layer for x in layers] == [0, 2]  # the two fusion layers, not the BiLSTM
    n = len(pred.tokens)
    for layer in layers:
        att = layer.attention
        assert len(att) == n and all(len(row) == n for row in att)
        for i, row in enumerate(att):
            assert sum(row) == pytest.approx(1.0, abs=1e-5)
            assert row[i] == 0.0  # self-disabled mask
        assert len(layer.gate_mean) == n and all(0.0 < g < 1.0 for g in layer.gate_mean)


def test_one_token_sentence(psa_run):
    _, run, _ = psa_run
    pred = Tagger.load(run / "model").predict(["Yes"], explain=True)[0]
    assert len(pred.tags) == 1
    assert pred.explanation[0].attention == [[0.0]]


def test_attention_heatmap_command(psa_run, tmp_path):
    _, run, _ = psa_run

    def attention(out: str) -> None:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "seqlab",
                "-q",
                "attention",
                str(run / "model"),
                "The dollar moved higher .",
                "--out",
                str(tmp_path / out),
            ],
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
        assert proc.returncode == 0, proc.stderr

    attention("heat.png")
    for name in ("heat-layer0.png", "heat-layer2.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    attention("bare")
    assert (tmp_path / "bare-layer0.png").read_bytes()[:4] == b"\x89PNG"  # .png added to a bare name


def test_early_variant_and_softmax_decoder_train(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = psa_config(path, variant="early").model_dump(mode="json")
    raw["model"]["decoder"] = {"type": "softmax"}
    raw["train"]["max_epochs"] = 30
    result = train(config_from_dict(raw), tmp_path / "run", progress=False)
    assert result.dev["f1"] > 95.0


def test_psa_batches_side_by_side_predict_what_one_thread_does(psa_run):
    path, run, _ = psa_run
    sentences = read_conll(path, label_column=None)
    assert_same_on_two_threads(Tagger.load(run / "model"), sentences, explain=True, confidence=True, nbest=2)
