"""Data-parallel training (``--nproc``): the weights of one process, a killed rank, resume, errors.

Three 2-process runs on CPU (gloo) in all: one killed after its first checkpoint, its resumption, and an
uninterrupted one; everything else runs without spawning ranks.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from seqlab.config import config_from_dict
from seqlab.data.batching import Encoded, batch_groups
from seqlab.errors import SeqlabError
from seqlab.io.files import recover_dir
from seqlab.training import TrainResult, train, train_seeds
from seqlab.training.distributed import RankFailed, _context, _exit_with_launcher, _failure, _stop, _watch
from seqlab.training.ranks import Ranks
from tests.conftest import SAMPLE, first_sentences, tiny_config

# 21 sentences in batches of 5: four batches split 3 + 2 between two ranks, and one of a single sentence
# (rank 1 back-propagates a stand-in with weight 0). SGD with momentum; the clip (gradient norms here: 5 to
# 40) bites on most steps, not all: averaged per-rank means, a rank clipping its own gradient, or a loss
# weight off by 0.1% end elsewhere.
SENTENCES = 21


def _config(data: Path, epochs: int):
    raw = tiny_config(data).model_dump(mode="json")  # dropout 0 everywhere
    # CPU processes (gloo) on any machine: on one with fewer GPUs than processes, CUDA ranks are refused
    raw["train"].update(max_epochs=epochs, optimizer="sgd", lr=0.05, clip=10.0, batch_size=5, threads=1, device="cpu")
    return config_from_dict(raw)


def _weights(run: Path, folder: str = "checkpoint") -> dict[str, torch.Tensor]:
    return load_file(str(run / folder / "model.safetensors"))


def _losses(run: Path) -> list[float]:
    return [json.loads(line)["loss"] for line in (run / "log.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """A 2-process run with rank 1 killed (SIGKILL) once the first checkpoint is written, then an
    uninterrupted 2-process run of one epoch more than that checkpoint holds."""
    root = tmp_path_factory.mktemp("ddp")
    data = root / "tiny.txt"
    data.write_text(first_sentences(SAMPLE, SENTENCES), encoding="utf-8")
    part, outcome = root / "part", {}

    def run_to_be_killed():
        try:
            train(_config(data, 30), part, progress=False, nproc=2)
        except SeqlabError as err:
            outcome["error"] = err

    thread = threading.Thread(target=run_to_be_killed)
    thread.start()
    deadline = time.monotonic() + 180
    while not (part / "checkpoint" / "trainer.json").exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    rank1 = [p for p in multiprocessing.active_children() if p.name == "seqlab-rank1"]
    assert rank1, "rank 1 is not running"
    os.kill(rank1[0].pid, signal.SIGKILL)
    killed = time.monotonic()
    thread.join(60)
    assert not thread.is_alive(), "the launcher hangs after a rank was killed"
    outcome["seconds_to_fail"] = time.monotonic() - killed
    recover_dir(part / "checkpoint")  # the kill may have come inside the checkpoint's folder swap
    epochs = json.loads((part / "checkpoint" / "trainer.json").read_text())["trainer"]["epoch"] + 1
    full = root / "full"
    train(_config(data, epochs), full, progress=False, nproc=2)
    return {"root": root, "data": data, "part": part, "full": full, "epochs": epochs, **outcome}


def test_shards_split_every_batch_and_weigh_it_as_one_process():
    """Every sentence of a batch goes to exactly one rank, every rank has one shard per batch, and the loss
    weights make DDP's mean of the ranks' gradients the gradient of the whole batch's mean (or sum)."""
    items = [Encoded(n, {}) for n in [3, 7, 4, 9, 2, 8, 5, 6, 1, 10, 11]]
    groups = batch_groups(items, batch_size=4)  # 4 + 4 + 3 sentences
    for world in (1, 2, 3, 5):
        for reduction in ("mean", "sum"):
            shards = [Ranks(r, world).shard(groups, items, {}, reduction) for r in range(world)]
            assert {len(s) for s in shards} == {len(groups)}
            for step, group in enumerate(groups):
                parts = [shards[r][step] for r in range(world)]
                counted = [p for p in parts if p.counted]
                assert sorted(i for p in counted for i in p.batch.index) == sorted(group)
                assert all(p.scale == 0.0 and len(p.batch.index) == 1 for p in parts if not p.counted)
                if world == 1:
                    assert parts[0].scale is None  # the batch's own mean or sum, as before
                    continue
                weight = 1.0 if reduction == "sum" else 1.0 / len(group)  # of a sentence in one process
                assert all(p.scale / world == pytest.approx(weight) for p in counted)  # DDP divides by world


def test_two_processes_end_with_the_weights_of_one(runs, tmp_path):
    one = tmp_path / "one"
    train(_config(runs["data"], runs["epochs"]), one, progress=False)
    full = runs["full"]
    a, b = _weights(one), _weights(full)
    assert a.keys() == b.keys()
    for name in a:
        assert torch.allclose(a[name], b[name], rtol=1e-5, atol=1e-5), name
    assert _losses(full) == pytest.approx(_losses(one), rel=1e-5)
    assert _losses(full)[-1] < _losses(full)[0]  # it trained
    # rank 0 alone wrote, and wrote what one process writes
    assert sorted(p.name for p in full.iterdir()) == sorted(p.name for p in one.iterdir())
    log = [json.loads(line) for line in (full / "log.jsonl").read_text().splitlines()]
    assert len(log) == runs["epochs"] and all(r["sentences_per_s"] > 0 for r in log)


def test_a_killed_rank_fails_the_run_and_resume_finishes_it(runs, capsys):
    from seqlab.cli import main

    err = runs["error"]
    assert isinstance(err, RankFailed) and err.exit_code == 1
    assert str(err) == "data-parallel rank 1 was killed by SIGKILL"
    assert runs["seconds_to_fail"] < 30
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("seqlab-rank")]
    part, full = runs["part"], runs["full"]
    config = runs["root"] / "tiny.yaml"
    config.write_text(yaml.safe_dump(_config(runs["data"], runs["epochs"]).model_dump(mode="json"), sort_keys=False))
    capsys.readouterr()
    assert main(["-q", "train", str(config), "--out", str(part), "--resume", "--nproc", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(part / "model")
    for folder in ("checkpoint", "model"):
        got, want = _weights(part, folder), _weights(full, folder)
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), folder
    assert _losses(part) == _losses(full)


@pytest.mark.parametrize("value", ["0", "-1", "65", "two"])
def test_nproc_out_of_range_is_a_one_line_error(value, capsys):
    from seqlab.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["train", "c.yaml", "--out", "o", "--nproc", value])
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--nproc: expected an integer in 1..64" in lines[0]


def test_seeds_run_each_seed_on_nproc_processes(tiny_corpus, tmp_path, monkeypatch):
    import seqlab.training.distributed

    calls = []

    def fake_launch(config, out_dir, data_root, resume, progress, nproc):
        calls.append((config.train.seed, Path(out_dir).name, nproc))
        return TrainResult(Path(out_dir), 1, {"f1": float(config.train.seed)}, None, 1, 1.0)

    monkeypatch.setattr(seqlab.training.distributed, "launch", fake_launch)
    summary = train_seeds(_config(tiny_corpus, 1), tmp_path / "multi", [4, 5], progress=False, nproc=2)
    assert calls == [(4, "seed-4", 2), (5, "seed-5", 2)]
    assert summary["dev"]["values"] == [4.0, 5.0]


def test_the_error_of_a_failed_run(tmp_path, caplog):
    """Bad input reported by any rank wins (exit 2, its one line); then a rank that died without a report;
    then the earliest error (later ones are peers losing their connection), logged with its traceback."""

    def report(rank, when, message, expected, code):
        (tmp_path / f"error-{rank}.json").write_text(
            json.dumps(
                {
                    "rank": rank,
                    "time": when,
                    "message": message,
                    "exit_code": code,
                    "expected": expected,
                    "traceback": "" if expected else f"Traceback (most recent call last):\n  {message}\n",
                }
            )
        )

    report(0, 2.0, "RuntimeError: Connection closed by peer", False, 1)
    err = _failure(tmp_path, {0: 1, 1: -9})
    assert isinstance(err, RankFailed) and str(err) == "data-parallel rank 1 was killed by SIGKILL"
    report(1, 1.0, "ValueError: boom", False, 1)
    with caplog.at_level("ERROR", logger="seqlab"):
        err = _failure(tmp_path, {0: 1, 1: 1})
    assert str(err) == "data-parallel rank 1 failed: ValueError: boom" and err.exit_code == 1
    assert "Traceback" in caplog.text
    report(1, 3.0, "tiny.txt:2: expected 3 columns", True, 2)
    err = _failure(tmp_path, {1: 2})
    assert type(err) is SeqlabError and err.exit_code == 2 and str(err) == "tiny.txt:2: expected 3 columns"


def test_one_failed_process_stops_the_others(tmp_path):
    context = multiprocessing.get_context("spawn")
    procs = [context.Process(target=time.sleep, args=(120,)), context.Process(target=sys.exit, args=(3,))]
    start = time.monotonic()
    try:
        for p in procs:
            p.start()
        assert _watch(procs, tmp_path) == {1: 3}
    finally:
        _stop(procs)
    assert not any(p.is_alive() for p in procs) and time.monotonic() - start < 30


def _rank_of(launcher: int, ready: str) -> None:
    """A stand-in rank: watches its launcher, as every rank does, and would otherwise sleep a minute."""
    _exit_with_launcher(launcher)
    Path(ready).touch()
    time.sleep(60)


def test_a_rank_exits_when_its_launcher_is_killed(tmp_path):
    context = _context()  # the ranks' own (a fork server here): their parent is not the launcher
    launcher = context.Process(target=time.sleep, args=(60,))
    launcher.start()
    rank = context.Process(target=_rank_of, args=(launcher.pid, str(tmp_path / "ready")))
    try:
        rank.start()
        deadline = time.monotonic() + 60
        while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rank.is_alive()
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.join()
        rank.join(15)
        assert rank.exitcode == 1  # the watch thread's exit, a second or so after the launcher's death
    finally:
        _stop([launcher, rank])


def test_a_rank_takes_its_generator_states_from_the_checkpoint_and_drops_them_from_the_extras():
    rank1, cpu = Ranks(rank=1, world=2), torch.device("cpu")
    torch.manual_seed(5)
    saved = torch.get_rng_state()
    extra = {"rng.rank1": saved, "rng.cuda.rank1": torch.zeros(16, dtype=torch.uint8), "average.w": torch.ones(2)}
    torch.manual_seed(6)
    assert set(rank1.own_rng(extra, 3, cpu)) == {"average.w"}  # a GPU's state is not used on a CPU rank
    assert torch.equal(torch.get_rng_state(), saved)
    rank1.own_rng({}, 3, cpu)  # none saved: a seed of its own
    own = torch.get_rng_state()
    torch.manual_seed(3 * 1_000_003 + 1)
    assert torch.equal(own, torch.get_rng_state()) and not torch.equal(own, saved)
    for key in ("rng.rank1", "rng.cuda.rank1"):
        with pytest.raises(SeqlabError, match="RNG state of rank 1 is not a byte vector"):
            rank1.own_rng({**extra, key: torch.zeros(3)}, 3, cpu)
    torch.manual_seed(6)
    before = torch.get_rng_state()
    assert set(Ranks(rank=0, world=2).own_rng(extra, 3, cpu)) == {"average.w"}  # rank 0 keeps its own state
    assert torch.equal(torch.get_rng_state(), before)
