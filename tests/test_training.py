"""Training loop: schedule, logs and plots, resume after a kill, seeds, repeatability."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from seqlab.config import TrainConfig, config_from_dict
from seqlab.tagger import Tagger
from seqlab.training import learning_rate, train, train_seeds
from seqlab.training.averaging import WeightAverage
from tests.conftest import tiny_config


def test_learning_rate_schedule():
    cfg = TrainConfig(lr=0.015, lr_decay=0.05)
    assert learning_rate(cfg, 0) == pytest.approx(0.015)
    assert learning_rate(cfg, 10) == pytest.approx(0.015 / 1.5)


def test_step_halving_schedule_follows_gcdt_code():
    """GCDT's code: lr_0 for 1000 steps, then lr_0 * min(1, 2 ** ((1000 - step) / 3000)), at least 5e-6."""
    cfg = TrainConfig(
        optimizer="adam", lr=8e-4, lr_schedule="step_halving", lr_hold_steps=1000, lr_half_life_steps=3000, lr_min=5e-6
    )
    for done in (0, 999, 1000, 2500, 4000, 7000, 13000, 40000):
        expected = max(8e-4 * min(1.0, 2 ** ((1000 - done) / 3000)), 5e-6)
        assert learning_rate(cfg, 3, 0, 50, done) == pytest.approx(expected, rel=1e-12)
    assert learning_rate(cfg, 0, 0, 50, 4000) == pytest.approx(4e-4)  # the epoch does not enter
    assert learning_rate(cfg, 80, 10, 50) == pytest.approx(8e-4 * 2 ** ((1000 - 4010) / 3000))  # default count
    assert learning_rate(cfg, 10**6, 0, 50) == 5e-6


def test_step_schedule_resumes_at_the_same_step(tiny_corpus, tmp_path):
    """The run's step count is checkpointed: a resumed step_halving run sets the same rates as one in one go."""
    over = dict(
        optimizer="adam",
        lr=0.01,
        lr_schedule="step_halving",
        lr_hold_steps=2,
        lr_half_life_steps=3,
        lr_decay=TrainConfig.model_fields["lr_decay"].default,
    )  # the tiny config's own decay: refused
    train(_short(tiny_corpus, 4, **over), tmp_path / "full", progress=False)
    train(_short(tiny_corpus, 2, **over), tmp_path / "part", progress=False)
    train(_short(tiny_corpus, 4, **over), tmp_path / "part", resume=True, progress=False)
    full = [json.loads(x) for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    part = [json.loads(x) for x in (tmp_path / "part" / "log.jsonl").read_text().splitlines()]
    assert [x["lr"] for x in part] == pytest.approx([x["lr"] for x in full], rel=1e-12)
    assert [x["loss"] for x in part] == pytest.approx([x["loss"] for x in full], rel=1e-5)
    rates = [x["lr"] for x in full]  # the rate of each epoch's last step
    assert rates == sorted(rates, reverse=True) and len(set(rates)) == 4 and rates[0] < 0.01


def _short(path, epochs, **train_over):
    raw = tiny_config(path).model_dump(mode="json")
    raw["train"].update(max_epochs=epochs, **train_over)
    return config_from_dict(raw)


def test_log_plot_and_results(tiny_corpus, tmp_path):
    train(_short(tiny_corpus, 3), tmp_path / "run", progress=False)
    lines = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [x["epoch"] for x in lines] == [1, 2, 3]
    for key in ("loss", "lr", "dev", "seconds", "sentences_per_s", "tokens_per_s"):
        assert key in lines[0]
    assert (tmp_path / "run" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["test"]["f1"] >= 0 and results["best_epoch"] in (1, 2, 3)
    pred_lines = [x for x in (tmp_path / "run" / "test.predictions.txt").read_text().splitlines() if x]
    assert len(pred_lines[0].split()) == 4  # word POS gold predicted: conlleval format


def test_same_seed_same_run(tiny_corpus, tmp_path):
    """On the CPU with no setting (on a GPU it takes train.deterministic: tests/test_cuda.py)."""
    a = train(_short(tiny_corpus, 2, device="cpu"), tmp_path / "a", progress=False)
    b = train(_short(tiny_corpus, 2, device="cpu"), tmp_path / "b", progress=False)
    la = [json.loads(x)["loss"] for x in (tmp_path / "a" / "log.jsonl").read_text().splitlines()]
    lb = [json.loads(x)["loss"] for x in (tmp_path / "b" / "log.jsonl").read_text().splitlines()]
    assert la == lb and a.dev == b.dev


def test_resume_continues_to_the_same_result(tiny_corpus, tmp_path):
    """4 epochs in one go == 2 epochs, 'killed', then --resume to 4 (SGD with momentum state); on the CPU (on a GPU
    with train.deterministic: tests/test_cuda.py)."""
    over = dict(optimizer="sgd", lr=0.05, device="cpu")
    full = train(_short(tiny_corpus, 4, **over), tmp_path / "full", progress=False)
    train(_short(tiny_corpus, 2, **over), tmp_path / "part", progress=False)
    resumed = train(_short(tiny_corpus, 4, **over), tmp_path / "part", resume=True, progress=False)
    lf = [json.loads(x)["loss"] for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    lr = [json.loads(x)["loss"] for x in (tmp_path / "part" / "log.jsonl").read_text().splitlines()]
    assert len(lr) == 4
    assert lr == pytest.approx(lf, rel=1e-5)
    assert resumed.dev["f1"] == pytest.approx(full.dev["f1"])


def test_early_stopping_patience(tiny_corpus, tmp_path):
    # a learning rate of ~0 never improves after the first epoch: patience 2 stops after epoch 3
    result = train(_short(tiny_corpus, 20, lr=1e-9, patience=2), tmp_path / "run", progress=False)
    assert result.epochs_run == 3 and result.best_epoch == 1


def test_seeds_summary(tiny_corpus, tmp_path):
    summary = train_seeds(_short(tiny_corpus, 1), tmp_path / "multi", [1, 2], progress=False)
    assert summary["seeds"] == [1, 2] and len(summary["test"]["values"]) == 2
    assert summary["test"]["max"] == max(summary["test"]["values"])
    assert (tmp_path / "multi" / "seed-2" / "model" / "model.safetensors").is_file()


def test_logged_dev_scores_match_the_saved_model(tiny_corpus, tmp_path):
    """Dev scores in the log come from the model as it is after the epoch (no stale cached features):
    re-scoring the saved best model on dev gives exactly the logged number."""
    from seqlab import Tagger
    from seqlab.data.readers import read_conll

    train(_short(tiny_corpus, 3, lr=0.003), tmp_path / "run", progress=False)
    log = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    best = max(log, key=lambda r: r["dev"]["f1"])
    scores = Tagger.load(tmp_path / "run" / "model").evaluate(read_conll(tiny_corpus, label_column=2)).scores
    assert scores.f1 == pytest.approx(best["dev"]["f1"])
    assert len({round(r["dev"]["f1"], 6) for r in log}) > 1  # the scores move as the model trains


def test_demo_command_runs(tmp_path, capsys):
    from seqlab.cli import main

    assert main(["-q", "demo", "--out", str(tmp_path / "demo"), "--max-epochs", "1"]) == 0
    out = capsys.readouterr().out
    assert "FB1" in out and "chunks:" in out
    assert " #/" in out  # the pound sign of the example sentence is a token


def test_weight_average_scores_and_saves_the_averaged_weights(tiny_corpus, tmp_path):
    """With ema_decay the checkpoint carries an average that moved away from the raw weights, the average
    follows the EMA recurrence, and the reported dev score is the saved model's."""
    cfg = _short(tiny_corpus, 1, optimizer="sgd", lr=0.05, ema_decay=0.9)  # one epoch: it is the best one
    train(cfg, tmp_path / "avg", progress=False)
    raw = load_file(str(tmp_path / "avg" / "checkpoint" / "model.safetensors"))  # last raw weights
    saved = load_file(str(tmp_path / "avg" / "model" / "model.safetensors"))  # best model
    trainer = load_file(str(tmp_path / "avg" / "checkpoint" / "trainer.safetensors"))
    averaged = {k[len("extra.module.") :]: v for k, v in trainer.items() if k.startswith("extra.module.")}
    assert trainer["extra.n_averaged"].item() > 1
    assert any(not torch.equal(raw[k], averaged[k]) for k in raw), "the average never moved from the raw weights"
    assert all(torch.equal(saved[k], averaged[k]) for k in saved), "the saved model is not the average"
    # The EMA recurrence on a known sequence of weights.
    net = Tagger.load(tmp_path / "avg" / "model").net
    ema = WeightAverage(net, 0.5)
    first = {k: v.clone() for k, v in net.state_dict().items()}
    ema.update(net)  # copies
    with torch.no_grad():
        for p in net.parameters():
            p.add_(1.0)
    ema.update(net)  # 0.5 * w + 0.5 * (w + 1) = w + 0.5
    for name, p in ema.net.named_parameters():
        assert torch.allclose(p, first[name] + 0.5, atol=1e-6)
    # dev scores in the log are those of the saved (averaged) best model
    log = [json.loads(x) for x in (tmp_path / "avg" / "log.jsonl").read_text().splitlines()]
    results = json.loads((tmp_path / "avg" / "results.json").read_text())
    assert results["dev"]["f1"] == pytest.approx(max(x["dev"]["f1"] for x in log))


def test_resume_with_weight_average_gives_the_same_run(tiny_corpus, tmp_path):
    over = dict(optimizer="sgd", lr=0.05, ema_decay=0.9)
    full = train(_short(tiny_corpus, 4, **over), tmp_path / "full", progress=False)
    train(_short(tiny_corpus, 2, **over), tmp_path / "part", progress=False)
    resumed = train(_short(tiny_corpus, 4, **over), tmp_path / "part", resume=True, progress=False)
    lf = [json.loads(x)["dev"]["f1"] for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]
    lr = [json.loads(x)["dev"]["f1"] for x in (tmp_path / "part" / "log.jsonl").read_text().splitlines()]
    assert lr == pytest.approx(lf, abs=1e-6)
    assert resumed.dev["f1"] == pytest.approx(full.dev["f1"])


def test_resume_refuses_what_it_cannot_continue(tiny_corpus, tmp_path):
    """A changed model section, another optimiser, a damaged checkpoint, or a run whose checkpoint is gone:
    one-line errors, and the finished epochs stay on disk."""
    import shutil

    from seqlab.config import config_from_dict
    from seqlab.errors import SeqlabError

    run_dir = tmp_path / "run"
    train(_short(tiny_corpus, 1, optimizer="sgd", lr=0.05), run_dir, progress=False)
    log_before = (run_dir / "log.jsonl").read_text()
    raw = _short(tiny_corpus, 2, optimizer="sgd", lr=0.05).model_dump(mode="json")
    raw["model"]["encoders"][0]["hidden"] = 64
    with pytest.raises(SeqlabError, match="model section differs"):
        train(config_from_dict(raw), run_dir, resume=True, progress=False)
    with pytest.raises(SeqlabError, match="trained with SGD.*train.optimizer=adam"):
        train(_short(tiny_corpus, 2, optimizer="adam"), run_dir, resume=True, progress=False)
    ckpt = run_dir / "checkpoint"
    backup = tmp_path / "ckpt-backup"
    shutil.copytree(ckpt, backup)
    (ckpt / "trainer.json").write_text("{not json")
    with pytest.raises(SeqlabError, match="trainer.json: unreadable or corrupt"):
        train(_short(tiny_corpus, 2, optimizer="sgd", lr=0.05), run_dir, resume=True, progress=False)
    (ckpt / "trainer.json").write_text('{"trainer": [], "optimizer": {}}')
    with pytest.raises(SeqlabError, match="trainer.json: expected"):
        train(_short(tiny_corpus, 2, optimizer="sgd", lr=0.05), run_dir, resume=True, progress=False)
    shutil.copy(backup / "trainer.json", ckpt / "trainer.json")
    from safetensors.torch import load_file, save_file

    for key, bad in (("rng.cuda", torch.zeros(3)), ("rng.torch", torch.zeros(2, 2, dtype=torch.uint8))):
        tensors = load_file(str(backup / "trainer.safetensors"))
        save_file({**tensors, key: bad}, str(ckpt / "trainer.safetensors"))
        with pytest.raises(SeqlabError, match=f"trainer.safetensors: '{key}' is not an RNG state"):
            train(_short(tiny_corpus, 2, optimizer="sgd", lr=0.05), run_dir, resume=True, progress=False)
    (ckpt / "trainer.safetensors").write_bytes(b"\x00" * 10)
    with pytest.raises(SeqlabError, match="trainer.safetensors: corrupt"):
        train(_short(tiny_corpus, 2, optimizer="sgd", lr=0.05), run_dir, resume=True, progress=False)
    shutil.rmtree(ckpt)
    with pytest.raises(SeqlabError, match="refusing to start it over"):
        train(_short(tiny_corpus, 2, optimizer="sgd", lr=0.05), run_dir, resume=True, progress=False)
    assert (run_dir / "log.jsonl").read_text() == log_before


def test_kill_in_the_folder_swap_or_after_the_log_append_resumes_bit_identical(tiny_corpus, tmp_path, monkeypatch):
    """Simulated kills: (a) between the two renames of the checkpoint swap, (b) after an epoch's log line
    but before its checkpoint. Both resume to the same model as an uninterrupted run, with an intact log."""
    import os

    from safetensors.torch import load_file

    import seqlab.io.files as sio

    # deterministic: on a GPU the embedding backward adds with atomics in a varying order otherwise
    cfg2, cfg3, cfg4 = (_short(tiny_corpus, n, optimizer="sgd", lr=0.05, deterministic=True) for n in (2, 3, 4))
    train(cfg4, tmp_path / "full", progress=False)
    want = load_file(str(tmp_path / "full" / "model" / "model.safetensors"))
    want_log = [json.loads(x)["loss"] for x in (tmp_path / "full" / "log.jsonl").read_text().splitlines()]

    # (a) a kill right after the old checkpoint folder was moved aside, before the new one moved in
    run_a = tmp_path / "a"
    train(cfg2, run_a, progress=False)
    real_replace = os.replace
    calls = {"n": 0}

    def dying_replace(src, dst):
        real_replace(src, dst)
        if str(src).endswith(f"{os.sep}checkpoint") and str(dst).endswith(".old"):
            calls["n"] += 1
            raise KeyboardInterrupt("killed inside the swap")

    monkeypatch.setattr(sio.os, "replace", dying_replace)
    with pytest.raises(KeyboardInterrupt):
        train(cfg4, run_a, resume=True, progress=False)
    monkeypatch.setattr(sio.os, "replace", real_replace)
    assert calls["n"] == 1 and not (run_a / "checkpoint").exists()
    train(cfg4, run_a, resume=True, progress=False)

    # (b) a kill after epoch 3's log line, before its checkpoint: the log has a line the checkpoint lacks
    run_b = tmp_path / "b"
    train(cfg3, run_b, progress=False)
    lines = (run_b / "log.jsonl").read_text().splitlines()
    import shutil

    shutil.rmtree(run_b / "checkpoint")
    train(cfg2, tmp_path / "b2", progress=False)
    shutil.copytree(tmp_path / "b2" / "checkpoint", run_b / "checkpoint")  # the state after epoch 2
    assert len(lines) == 3
    train(cfg4, run_b, resume=True, progress=False)

    for run_dir in (run_a, run_b):
        got = load_file(str(run_dir / "model" / "model.safetensors"))
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
        losses = [json.loads(x)["loss"] for x in (run_dir / "log.jsonl").read_text().splitlines()]
        assert losses == pytest.approx(want_log, rel=1e-6)


@pytest.mark.parametrize("model", ["bilstm-crf", "psa", "gcdt"])
def test_a_training_step_gives_the_same_gradients_on_every_run(model, tmp_path):
    """The same weights and batch give every parameter the same gradient to the bit, run after run: no operation
    whose backward sums in a varying order (advanced indexing's index_put_ with accumulate on CPU did, in the char
    features, once a batch is large enough to be split over threads), so a seed repeats a training run in another
    process too."""
    from tests.conftest import SAMPLE, assert_same_gradients_every_run, first_sentences
    from tests.test_gcdt import gcdt_config
    from tests.test_psa_tagger import psa_config

    path = tmp_path / "sample.txt"
    path.write_text(first_sentences(SAMPLE, 64), encoding="utf-8")
    raw = {"bilstm-crf": tiny_config, "psa": psa_config, "gcdt": gcdt_config}[model](path).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["char"]["hidden"] = 64  # 64-d char vectors at every position
    assert_same_gradients_every_run(config_from_dict(raw))
