"""On a CUDA GPU: the CRF's PyTorch recursions against the CPU's NumPy ones, and each architecture trained on the
GPU (BiLSTM-CRF, PSA, the self-attentive Bi-LSTM-CNN, GCDT, FLAT): it overfits 20 sentences, tags on the GPU what
it tags on the CPU, whatever the batch size, and its saved folder loads on either. Skipped without a GPU: CI has
none; a machine with one runs them with the rest of the suite (`make test`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.readers import read_bmes, read_conll
from seqlab.training import train
from tests.conftest import SAMPLE, first_sentences, tiny_config
from tests.test_crf import make_crf, padded_batch

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU visible to PyTorch: its paths are checked on a machine with one"
)

CUDA, CPU = torch.device("cuda"), torch.device("cpu")


# ---------------------------------------------------------------- the CRF on both devices


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("constrained", [False, True])
@pytest.mark.parametrize("host", [True, False], ids=["host", "gpu"])
def test_crf_on_the_gpu_equals_the_cpu(seed, constrained, host, monkeypatch):
    """log Z and its gradients, Viterbi paths and scores, marginals and the 3 best paths on the GPU against the
    CPU's (float64, padded rows of garbage): the GPU's recursions and Viterbi run on the host (the default for
    training and for batches of 1-2) or as PyTorch operations on the GPU."""
    from seqlab.crf import crf as crf_module
    from seqlab.crf import partition as crf_partition

    monkeypatch.setattr(crf_partition, "GPU_ON_HOST", host)
    monkeypatch.setattr(crf_module, "GPU_HOST_VITERBI_ROWS", 6 if host else 0)
    crf = make_crf(7, seed, constrained)
    em, mask = padded_batch([5, 1, 9, 3, 9, 2], 7, seed, pad_len=11)
    tags = torch.randint(0, 7, mask.shape, generator=torch.Generator().manual_seed(seed))
    results = {}
    for device in (CPU, CUDA):
        here = make_crf(7, seed, constrained).to(device)
        x = em.to(device).requires_grad_(True)
        log_z = here.log_partition(x, mask.to(device))
        nll = here.nll(x, tags.to(device), mask.to(device)).sum()
        grads = torch.autograd.grad(log_z.sum() + nll, [x, here.transitions, here.start_transitions])
        paths, scores = here.viterbi(em.to(device), mask.to(device))
        assert paths.device.type == scores.device.type == grads[0].device.type == device.type
        results[device.type] = (
            [t.detach().cpu() for t in (log_z, nll, *grads, scores)],
            paths.cpu(),
            here.marginals(em.to(device), mask.to(device)).detach().cpu(),
            here.nbest(em.to(device), mask.to(device), 3),
        )
    cpu, gpu = results["cpu"], results["cuda"]
    for a, b in zip(cpu[0], gpu[0]):
        torch.testing.assert_close(b, a, rtol=1e-9, atol=1e-9)
    assert torch.equal(cpu[1], gpu[1])
    torch.testing.assert_close(gpu[2], cpu[2], rtol=1e-9, atol=1e-9)
    assert [[p.tags for p in row] for row in gpu[3]] == [[p.tags for p in row] for row in cpu[3]]
    assert crf.transitions.device == CPU  # the reference CRF was left alone


# ---------------------------------------------------------------- every architecture trained on the GPU


def _chunking(root: Path, make) -> tuple[object, Path]:
    path = root / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    return make(path), path


def _families() -> dict:
    from tests.test_gcdt import gcdt_config
    from tests.test_li2019 import att_config
    from tests.test_psa_tagger import psa_config

    def flat(root: Path):
        from tests.test_flat import ORGS, make_corpus, raw_config

        corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
        make_corpus(corpus)
        lexicon.write_text(
            "\n".join(ORGS + ["北京", "大学", "华为", "有限公司", "毕业", "工程师"]) + "\n", encoding="utf-8"
        )
        return config_from_dict(raw_config(corpus, lexicon)), corpus

    return {
        "bilstm-crf": lambda root: _chunking(root, tiny_config),
        "psa": lambda root: _chunking(root, psa_config),
        "att-bilstm-cnn": lambda root: _chunking(root, att_config),
        "gcdt": lambda root: _chunking(root, gcdt_config),
        "flat": flat,
    }


def _on(config, device: str):
    raw = config.model_dump(mode="json")
    raw["train"]["device"] = device
    return config_from_dict(raw)


@pytest.fixture(scope="module", params=["bilstm-crf", "psa", "att-bilstm-cnn", "gcdt", "flat"])
def gpu_run(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    config, corpus = _families()[request.param](root)
    result = train(_on(config, "cuda"), root / "run", progress=False)
    sentences = read_bmes(corpus) if corpus.suffix == ".bmes" else read_conll(corpus, label_column=None)
    return request.param, root / "run" / "model", sentences, result


def test_each_architecture_overfits_20_sentences_on_the_gpu(gpu_run):
    name, _, _, result = gpu_run
    assert result.dev["f1"] > 97.0, name


def test_the_gpu_tags_what_the_cpu_tags_at_every_batch_size(gpu_run):
    name, model, sentences, _ = gpu_run
    on_gpu, on_cpu = Tagger.load(model, "cuda"), Tagger.load(model, "cpu")
    assert next(on_gpu.net.parameters()).device.type == "cuda"
    tags = on_cpu.predict_tags(sentences)
    assert on_gpu.predict_tags(sentences) == tags
    assert on_gpu.predict_tags(sentences, batch_size=1) == tags
    assert on_gpu.predict_tags(sentences, batch_size=3) == tags
    texts = [s.tokens for s in sentences[:6]]
    gpu, cpu = on_gpu.predict(texts, nbest=2), on_cpu.predict(texts, nbest=2)
    assert [[p.tags for p in g.nbest] for g in gpu] == [[p.tags for p in c.nbest] for c in cpu]
    # scores to float32 rounding and TF32: cuDNN's convolutions (the char CNN) multiply in TF32 by PyTorch's
    # default, 10 bits of mantissa (seen on an H100: 1.8e-3 on a path score of -3.1, 1.3e-4 on a confidence; on
    # an H200: 2.2e-3 on -0.74)
    for g, c in zip(gpu, cpu):
        for a, b in zip(g.nbest, c.nbest):
            assert a.score == pytest.approx(b.score, rel=5e-3, abs=5e-3)
    if name != "gcdt":  # the beam-search decoder gives no exact confidences (its test says so)
        gpu, cpu = on_gpu.predict(texts, confidence=True), on_cpu.predict(texts, confidence=True)
        for g, c in zip(gpu, cpu):
            assert g.token_confidence == pytest.approx(c.token_confidence, abs=2e-3)
            assert [s.confidence for s in g.spans] == pytest.approx([s.confidence for s in c.spans], abs=2e-3)


def test_a_model_saved_from_the_gpu_loads_on_either_device(gpu_run, tmp_path):
    _, model, sentences, _ = gpu_run
    on_gpu = Tagger.load(model, "cuda")
    before = on_gpu.predict_tags(sentences)
    on_gpu.save(tmp_path / "copy")
    for device in ("cpu", "cuda", "auto"):
        again = Tagger.load(tmp_path / "copy", device)
        assert again.predict_tags(sentences) == before, device
    assert Tagger.load(tmp_path / "copy", "auto").device.type == "cuda"


def test_cli_predicts_the_same_on_both_devices(gpu_run, tmp_path):
    name, model, sentences, _ = gpu_run
    if name != "bilstm-crf":
        pytest.skip("one architecture is enough for the command line")
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s.tokens) for s in sentences) + "\n", encoding="utf-8")
    outputs = []
    for device in ("cpu", "cuda"):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "seqlab",
                "predict",
                str(model),
                str(text),
                "--device",
                device,
                "--input-format",
                "raw",
                "--output-format",
                "jsonl",
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        outputs.append([json.loads(line)["tags"] for line in done.stdout.splitlines()])
    assert outputs[0] == outputs[1] and len(outputs[0]) == len(sentences)


@pytest.mark.parametrize("limit", [1 << 26, 1 << 10])
def test_psa_additive_scores_on_the_gpu_equal_the_cpu(monkeypatch, limit):
    """One GPU block (the default there) or many small ones: the scores and their gradients are the CPU's."""
    from seqlab.encoders import psa

    monkeypatch.setattr(psa, "GPU_BLOCK_ELEMENTS", limit)
    gen = torch.Generator().manual_seed(4)
    shapes = ((5, 9, 16), (5, 9, 16), (16,))
    q, k, w = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in shapes)
    g = torch.randn(5, 9, 9, generator=gen, dtype=torch.float64)
    out = {}
    for device in (CPU, CUDA):
        leaves = [x.to(device).requires_grad_() for x in (q, k, w)]
        scores = psa.AdditiveScores.apply(*leaves)
        out[device.type] = [
            x.detach().cpu() for x in (scores, *torch.autograd.grad((scores * g.to(device)).sum(), leaves))
        ]
    for a, b in zip(out["cpu"], out["cuda"]):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)


def test_a_resumed_gpu_run_with_dropout_ends_with_the_uninterrupted_runs_bits(tmp_path):
    """train.deterministic on, dropout 0.3: 4 epochs in one go, and 2 epochs then --resume to 4, end with the
    same weights (the checkpoint keeps the GPU's generator, from which the dropout masks come); so do two runs."""
    from safetensors.torch import load_file

    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")

    def config(epochs: int):
        raw = tiny_config(path).model_dump(mode="json")
        raw["model"]["embedder"]["dropout"] = raw["model"]["encoders"][0]["dropout"] = 0.3
        raw["train"].update(max_epochs=epochs, optimizer="sgd", lr=0.05, device="cuda", deterministic=True)
        return config_from_dict(raw)

    for run in ("full", "again"):
        train(config(4), tmp_path / run, progress=False)
    train(config(2), tmp_path / "part", progress=False)
    train(config(4), tmp_path / "part", resume=True, progress=False)
    want = load_file(str(tmp_path / "full" / "checkpoint" / "model.safetensors"))
    for run in ("again", "part"):
        got = load_file(str(tmp_path / run / "checkpoint" / "model.safetensors"))
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), run
    assert not torch.are_deterministic_algorithms_enabled()  # restored after training


@pytest.mark.parametrize("name", ["bilstm-crf", "psa", "att-bilstm-cnn", "gcdt", "flat"])
def test_each_architecture_trains_to_the_same_bits_twice_when_deterministic(name, tmp_path):
    """train.deterministic on a GPU: every operation of each architecture's training has a deterministic
    kernel (PyTorch raises where one has none), and two runs of one seed, dropout on, give the same weights."""
    from safetensors.torch import load_file

    config, _ = _families()[name](tmp_path)
    raw = config.model_dump(mode="json")
    raw["model"]["embedder"]["dropout"] = 0.2
    raw["train"].update(max_epochs=2, device="cuda", deterministic=True)
    weights = []
    for run in ("a", "b"):
        train(config_from_dict(raw), tmp_path / run, progress=False)
        weights.append(load_file(str(tmp_path / run / "checkpoint" / "model.safetensors")))
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_the_service_tags_on_the_gpu_what_it_tags_on_the_cpu(gpu_run, monkeypatch):
    """`seqlab serve --device cuda`: a worker's app (the environment its supervisor hands it) on the GPU answers
    what the CPU's answers."""
    pytest.importorskip("fastapi", reason="serving needs the extra seqlab[serve]")
    from fastapi.testclient import TestClient

    from seqlab.serving.app import app_from_env, create_app

    name, model, sentences, _ = gpu_run
    if name != "bilstm-crf":
        pytest.skip("one architecture is enough for the service")
    monkeypatch.setenv("SEQLAB_SERVE_MODEL", str(model))
    monkeypatch.setenv("SEQLAB_SERVE_DEVICE", "cuda")
    gpu = TestClient(app_from_env())
    assert gpu.get("/info").json()["device"].startswith("cuda")
    cpu = TestClient(create_app(Tagger.load(model, "cpu")))
    body = {"sentences": [" ".join(s.tokens) for s in sentences], "confidence": True}
    got, want = (c.post("/predict", json=body).json()["predictions"] for c in (gpu, cpu))
    assert [p["tags"] for p in got] == [p["tags"] for p in want]


def test_calibration_on_the_gpu_fits_the_cpus_temperature(gpu_run):
    """`seqlab calibrate --device cuda`: the temperature fitted on the GPU is the CPU's, to float rounding."""
    from seqlab.evaluation.calibration import fit_temperature

    name, model, _sentences, _ = gpu_run
    if name not in ("bilstm-crf", "att-bilstm-cnn"):  # a CRF and a softmax decoder
        pytest.skip("two decoders are enough for calibration")
    held_out = read_conll(SAMPLE.parent / "test.txt")[:40]  # the bundled sample's test part, with gold chunks
    fits = [fit_temperature(Tagger.load(model, device), held_out) for device in ("cpu", "cuda")]
    assert fits[1].temperature == pytest.approx(fits[0].temperature, rel=1e-2)
    assert fits[1].nll_after == pytest.approx(fits[0].nll_after, rel=1e-3)
