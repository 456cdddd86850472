"""The onnxruntime engine predicts what eager PyTorch predicts (tags, spans, confidences, n-best,
attention), and a model whose encoding does not export faithfully is refused, not run wrong."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from seqlab import Tagger
from seqlab.cli import main
from seqlab.data.readers import read_conll
from seqlab.errors import SeqlabError
from tests.conftest import tiny_config

pytest.importorskip("onnx", reason="the onnxruntime engine needs the extra seqlab[export] (onnx, onnxruntime)")
pytest.importorskip("onnxruntime", reason="the onnxruntime engine needs the extra seqlab[export] (onnx, onnxruntime)")


def _same_predictions(a, b, tol=1e-4):
    assert [p.tags for p in a] == [p.tags for p in b]
    assert [[(s.type, s.start, s.end) for s in p.spans] for p in a] == [
        [(s.type, s.start, s.end) for s in p.spans] for p in b
    ]
    for p, q in zip(a, b):
        assert p.confidence_kind == q.confidence_kind
        assert p.token_confidence == pytest.approx(q.token_confidence, abs=tol)
        assert [s.confidence for s in p.spans] == pytest.approx([s.confidence for s in q.spans], abs=tol)


def test_onnxruntime_predicts_like_torch(shared_tiny_model):
    path, model = shared_tiny_model
    sentences = read_conll(path, label_column=None)
    eager, onnx = Tagger.load(model), Tagger.load(model, engine="onnxruntime")
    assert (eager.info()["engine"], onnx.info()["engine"]) == ("torch", "onnxruntime")
    for batch in (64, 1):
        _same_predictions(
            eager.predict(sentences, batch, nbest=3, confidence=True),
            onnx.predict(sentences, batch, nbest=3, confidence=True),
        )
    want = [[p.tags for p in x.nbest] for x in eager.predict(sentences, nbest=3)]
    assert [[p.tags for p in x.nbest] for x in onnx.predict(sentences, nbest=3)] == want
    raw = "Confidence in the pound is widely expected to take another sharp dive ."
    assert onnx.predict(raw)[0].tags == eager.predict(raw)[0].tags  # text in, labels out


def _built(corpus, **model):
    """An untrained tagger (random weights give varied tags) on the tiny corpus."""
    config = tiny_config(corpus)
    raw = config.model_dump(mode="json")
    raw["model"].update(model)
    from seqlab.config import config_from_dict

    config = config_from_dict(raw)
    sentences = read_conll(corpus, label_column=2)
    return Tagger.build(config, sentences, "BIO"), read_conll(corpus, label_column=None)


@pytest.mark.parametrize(
    "encoders",
    [
        [
            {"type": "bilstm", "hidden": 16, "layers": 2, "stacking": "per_direction"},
            {"type": "parallel_attention", "heads": 2},
        ],
        [{"type": "bilstm", "hidden": 16}, {"type": "psa_fusion", "window": 4, "position_encoding": "absolute"}],
    ],
    ids=["att-bilstm", "psa"],
)
def test_attention_models_explain_the_same_on_onnxruntime(tiny_corpus, encoders):
    tagger, sentences = _built(tiny_corpus, encoders=encoders)
    expected = tagger.predict(sentences, explain=True, confidence=True)
    tagger.set_engine("onnxruntime")
    got = tagger.predict(sentences, explain=True, confidence=True)
    _same_predictions(expected, got)
    for p, q in zip(expected, got):
        for a, b in zip(p.explanation, q.explanation):
            assert (a.layer, a.gate_mean is None) == (b.layer, b.gate_mean is None)
            np.testing.assert_allclose(np.array(b.attention), np.array(a.attention), atol=1e-5)
    tagger.set_engine("torch")
    assert tagger.engine is None and tagger.predict_tags(sentences) == [p.tags for p in expected]


def test_a_time_step_loop_is_refused_not_run_wrong(tiny_corpus):
    """The deep-transition RNN loops over time steps in Python: tracing unrolls the loop to the sample's
    length, and the check against the eager network catches it."""
    tagger, sentences = _built(tiny_corpus, encoders=[{"type": "dt", "hidden": 8, "transitions": 2}])
    expected = tagger.predict_tags(sentences)
    with pytest.raises(SeqlabError, match="--engine onnxruntime: this model's exported graph .*use --engine torch"):
        tagger.set_engine("onnxruntime")
    assert tagger.engine is None and tagger.predict_tags(sentences) == expected


def test_auto_runs_small_batches_on_onnxruntime_and_large_ones_eagerly(shared_tiny_model, monkeypatch):
    from seqlab.runtime.engine import AUTO_ROWS

    path, model = shared_tiny_model
    sentences = read_conll(path, label_column=None)
    eager, auto = Tagger.load(model), Tagger.load(model, engine="auto")
    assert auto.info()["engine"] == "auto" and auto.engine.max_rows == AUTO_ROWS
    assert auto.info()["encoding"] == f"onnxruntime for batches of up to {AUTO_ROWS} sentences, torch for larger ones"
    rows: list[int] = []
    real_run = auto.engine.run
    monkeypatch.setattr(auto.engine, "run", lambda batch, *a: rows.append(len(batch.index)) or real_run(batch, *a))
    for batch in (1, AUTO_ROWS, AUTO_ROWS + 1, 64):
        rows.clear()
        _same_predictions(
            eager.predict(sentences, batch, nbest=2, confidence=True),
            auto.predict(sentences, batch, nbest=2, confidence=True),
        )
        if batch <= AUTO_ROWS:
            assert rows and max(rows) <= AUTO_ROWS  # every batch through the exported graph
        else:
            assert rows == [] or max(rows) <= AUTO_ROWS  # only a short last batch, if any
    assert len(sentences) > 2 * AUTO_ROWS
    rows.clear()
    with pytest.raises(SeqlabError, match="cannot ablate nothing"):  # the eager network's own check, not
        auto.predict_tags(sentences, 1, ablate=["nothing"])  # onnxruntime's "use --engine torch"
    assert rows == []


def test_auto_runs_eagerly_where_onnxruntime_cannot(tiny_corpus, shared_tiny_model, monkeypatch, caplog):
    """A model that does not export faithfully, or a machine without onnxruntime: one log line saying why,
    then every batch on torch (``--engine onnxruntime`` refuses both with an error instead)."""
    tagger, sentences = _built(tiny_corpus, encoders=[{"type": "dt", "hidden": 8, "transitions": 2}])
    expected = tagger.predict_tags(sentences, 1)
    with caplog.at_level("INFO", logger="seqlab"):
        tagger.set_engine("auto")
    assert tagger.engine is None and (tagger.info()["engine"], tagger.info()["encoding"]) == ("auto", "torch")
    assert "--engine auto: every batch runs on torch (this model's exported graph" in caplog.text
    assert tagger.predict_tags(sentences, 1) == expected
    tagger, sentences = _built(
        tiny_corpus, encoders=[{"type": "bilstm", "hidden": 16}, {"type": "psa_fusion", "window": 4}]
    )
    caplog.clear()
    with caplog.at_level("INFO", logger="seqlab"):
        tagger.set_engine("auto")  # exports fine, but onnxruntime was no faster on pairwise attention
    assert tagger.engine is None and "no faster on models with PSA's or FLAT's pairwise attention" in caplog.text
    import importlib.util

    real_find = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real_find(name, *a)
    )
    caplog.clear()
    _, model = shared_tiny_model
    with caplog.at_level("INFO", logger="seqlab"):
        assert Tagger.load(model, engine="auto").engine is None
    assert "needs onnx and onnxruntime: pip install 'seqlab[export]'" in caplog.text
    with pytest.raises(SeqlabError, match="needs onnx and onnxruntime"):
        Tagger.load(model, engine="onnxruntime")


@pytest.mark.parametrize("name", ["onnxruntime", "auto"])
def test_weights_changed_after_the_export_are_exported_again_not_run_stale(tiny_corpus, name, caplog):
    import torch

    tagger, sentences = _built(tiny_corpus)
    tagger.set_engine(name)
    before = tagger.predict_tags(sentences, 1)
    with torch.no_grad():
        for q in tagger.net.encoders.parameters():
            q.add_(torch.randn_like(q))  # in place, as an optimiser step or load_state_dict does
    engine = tagger.engine
    with caplog.at_level("INFO", logger="seqlab"):
        after = tagger.predict_tags(sentences, 1)
    assert "exporting it again" in caplog.text and tagger.engine is not engine and tagger.engine_name == name
    eager = Tagger(tagger.config, tagger.featurizers, tagger.tags, tagger.scheme, tagger.net)
    assert after == eager.predict_tags(sentences, 1) != before


def test_engine_errors_are_one_line(shared_tiny_model, monkeypatch):
    _, model = shared_tiny_model
    tagger = Tagger.load(model, engine="onnxruntime")
    with pytest.raises(SeqlabError, match="--ablate analyses the eager network"):
        tagger.predict_tags(read_conll(shared_tiny_model[0], label_column=None), ablate=["H"])
    with pytest.raises(SeqlabError, match="--engine: expected one of torch, onnxruntime, auto, got 'tensorrt'"):
        tagger.set_engine("tensorrt")

    class OutOfMemory:  # what onnxruntime does when a batch's tensors do not fit
        def __init__(self, real):
            self.get_inputs = real.get_inputs

        def run(self, *args):
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : bad_alloc\nmore detail")

    sessions = tagger.engine._sessions
    sessions[True] = OutOfMemory(tagger.engine._session(True))
    with pytest.raises(
        SeqlabError,
        match=r"failed on a batch of 1 sentences of up to 2 tokens \(\[ONNXRuntimeError\] "
        r": 6 : RUNTIME_EXCEPTION : bad_alloc\); try a smaller --batch-size",
    ) as err:
        tagger.predict(["He ran"], batch_size=1)
    assert "\n" not in str(err.value)
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    with pytest.raises(SeqlabError, match=r"needs onnx and onnxruntime: pip install 'seqlab\[export\]'"):
        Tagger.load(model, engine="onnxruntime")


def test_cli_predict_and_evaluate_on_onnxruntime(shared_tiny_model, capsys):
    path, model = shared_tiny_model
    outputs = {}
    for engine in ("torch", "onnxruntime", "auto"):
        assert (
            main(
                [
                    "-q",
                    "predict",
                    str(model),
                    str(path),
                    "--output-format",
                    "jsonl",
                    "--engine",
                    engine,
                    "--batch-size",
                    "3" if engine == "auto" else "64",
                ]
            )
            == 0
        )  # auto: small batches on onnxruntime
        outputs[engine] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert main(["-q", "evaluate", str(model), str(path), "--engine", engine]) == 0
        outputs[engine + "-eval"] = capsys.readouterr().out
    for engine in ("onnxruntime", "auto"):
        assert [p["tags"] for p in outputs["torch"]] == [p["tags"] for p in outputs[engine]]
        assert outputs["torch-eval"] == outputs[engine + "-eval"]
    with pytest.raises(SystemExit) as exit_:
        main(["-q", "predict", str(model), str(path), "--engine", "tensorrt"])
    assert exit_.value.code == 2 and "invalid choice: 'tensorrt'" in capsys.readouterr().err


def test_predict_workers_and_server_on_onnxruntime(shared_tiny_model, capsys):
    pytest.importorskip("fastapi", reason="serving needs the extra seqlab[serve]")
    from fastapi.testclient import TestClient

    from seqlab.serving.app import create_app

    path, model = shared_tiny_model
    assert main(["-q", "predict", str(model), str(path), "--engine", "torch"]) == 0
    eager = capsys.readouterr().out
    assert (
        main(["-q", "predict", str(model), str(path), "--engine", "onnxruntime", "--workers", "2", "--chunk", "7"]) == 0
    )
    assert capsys.readouterr().out == eager
    texts = ["Rockwell said the agreement calls for it to supply 200 additional so-called shipsets .", "He ran ."]
    answers = {}
    for engine in ("torch", "onnxruntime", "auto"):
        client = TestClient(create_app(Tagger.load(model, engine=engine)))
        assert client.get("/info").json()["engine"] == engine
        answers[engine] = client.post("/predict", json={"sentences": texts}).json()
    strip = lambda a: [[(s["type"], s["start"], s["end"]) for s in p["spans"]] for p in a["predictions"]]  # noqa: E731
    assert strip(answers["torch"]) == strip(answers["onnxruntime"]) == strip(answers["auto"])


def test_pairwise_tensors_are_bounded_by_running_batches_in_parts(tiny_corpus, monkeypatch):
    """PSA's additive scores are one (rows, T, T, d) tensor in the exported graph: a batch over the budget
    runs in parts (same predictions), and a sentence over 8 budgets alone is refused, not run out of memory."""
    import seqlab.runtime.engine as engine

    tagger, sentences = _built(
        tiny_corpus, encoders=[{"type": "bilstm", "hidden": 16}, {"type": "psa_fusion", "window": 4}]
    )
    expected = tagger.predict(sentences, confidence=True)
    tagger.set_engine("onnxruntime")
    tagger.pad_overhead = None  # one batch of all the sentences, which the budget then cuts
    runs = []
    real_run = tagger.engine.run
    monkeypatch.setattr(tagger.engine, "run", lambda batch, *a: runs.append(len(batch.index)) or real_run(batch, *a))
    longest = max(len(s.tokens) for s in sentences)
    monkeypatch.setattr(engine, "PAIRWISE_BUDGET", 3 * longest**2 * tagger.engine.pairwise_dim)
    _same_predictions(expected, tagger.predict(sentences, batch_size=64, confidence=True))
    assert max(runs) <= 3 and sum(runs) == len(sentences)
    monkeypatch.setattr(engine, "PAIRWISE_BUDGET", 16)
    with pytest.raises(
        SeqlabError,
        match="a sentence of .* tokens needs .* MiB for one attention tensor; tag with "
        "--max-length, or with --engine torch",
    ):
        tagger.predict(sentences)


def test_onnxruntime_is_refused_for_a_network_off_the_cpu():
    from seqlab.runtime.engine import refuse_off_cpu

    refuse_off_cpu(torch.device("cpu"))
    with pytest.raises(SeqlabError, match=r"^--engine onnxruntime runs on the CPU; the network is on cuda:0$"):
        refuse_off_cpu(torch.device("cuda", 0))
