"""The command line: each command works, and every bad input gets one line, exit code 2, no traceback."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import SAMPLE, first_sentences, tiny_config
from tests.forkserver import seqlab_command

ROOT = Path(__file__).resolve().parents[1]


def run(*args, stdin: str | None = None, cwd=None, fresh: bool = False) -> subprocess.CompletedProcess:
    """``python -m seqlab -q ARGS`` in a process of its own: forked from a server that has imported seqlab
    (tests/forkserver.py), or a fresh interpreter where ``fresh``."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [*seqlab_command(env, fresh), "-q", *map(str, args)],
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cli")
    data = root / "tiny.txt"
    data.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = tiny_config(data).model_dump(mode="json")
    # one thread, as the in-process tests train (two slow a model this small down); dev F1 is 100 from epoch 18
    raw["train"].update(max_epochs=20, threads=1)
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(raw))
    proc = run("train", cfg, "--out", root / "run", fresh=True)  # a training run of a fresh interpreter
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["dev"]["f1"] > 90
    return root / "run" / "model", data


def test_evaluate_predict_info_score(model_dir, tmp_path):
    model, data = model_dir
    proc = run("evaluate", model, data, "--output", tmp_path / "pred.txt")
    assert proc.returncode == 0 and "FB1:" in proc.stdout
    scored = run("score", tmp_path / "pred.txt", "--scheme", "BIO")
    assert scored.returncode == 0
    assert scored.stdout.splitlines()[1] == proc.stdout.splitlines()[1]  # same overall line as evaluate
    raw = run("predict", model, "-", "--output-format", "jsonl", stdin="He reckons the deficit will narrow .\n")
    assert raw.returncode == 0
    pred = json.loads(raw.stdout.splitlines()[0])
    assert pred["tokens"][0] == "He" and len(pred["tags"]) == 7
    assert pred["confidence_kind"] == "crf-marginal" and len(pred["token_confidence"]) == 7
    assert all(0 < p <= 1 for p in pred["token_confidence"])
    from seqlab import Tagger

    api = Tagger.load(model).predict(["He reckons the deficit will narrow ."], confidence=True)[0]
    assert pred["tags"] == api.tags and pred["token_confidence"] == pytest.approx(api.token_confidence, abs=1e-5)
    assert [s.pop("confidence") for s in pred["spans"]] == pytest.approx([s.confidence for s in api.spans], abs=1e-5)
    assert pred["spans"] == [{k: v for k, v in s.__dict__.items() if k != "confidence"} for s in api.spans]
    conll = run("predict", model, data)
    assert conll.returncode == 0
    first = conll.stdout.splitlines()[0].split()
    assert first[0] == "Confidence" and len(first) == 4  # input columns + predicted tag
    info = json.loads(run("info", model, fresh=True).stdout)  # and what a fresh interpreter prints
    assert info["decoder"] == "crf" and info["train_scheme"] == "BIOES"


def test_keeps_pound_tokens(model_dir, tmp_path):
    model, _ = model_dir
    f = tmp_path / "pound.txt"
    f.write_text("# NN B-NP\n1.8 CD I-NP\nbillion CD I-NP\n\n# NN B-NP\n")
    proc = run("predict", model, f)
    assert proc.returncode == 0
    assert [ln.split()[0] for ln in proc.stdout.splitlines() if ln] == ["#", "1.8", "billion", "#"]


@pytest.mark.parametrize(
    "content,needles",
    [
        ("Confidence NN B-NP\nin IN\n", ["line 2", "column"]),
        ("", ["empty"]),
    ],
)
def test_bad_training_files(tmp_path, content, needles):
    data = tmp_path / "bad.txt"
    data.write_text(content)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data).model_dump(mode="json")))
    proc = run("train", cfg, "--out", tmp_path / "run")
    assert_user_error(proc, str(data).split("/")[-1], *[n for n in needles if n != "line 2"])
    if "line 2" in needles:
        assert ":2:" in proc.stderr


def test_non_utf8_file(tmp_path):
    data = tmp_path / "latin1.txt"
    data.write_bytes("Confidence NN B-NP\ncaf\xe9 NN I-NP\n".encode("latin-1"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data).model_dump(mode="json")))
    assert_user_error(run("train", cfg, "--out", tmp_path / "run"), "latin1.txt:2", "utf-8")


def test_config_errors(tmp_path, tiny_corpus):
    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    cfg = tmp_path / "c.yaml"
    raw["train"]["learning_rate"] = 0.1
    cfg.write_text(yaml.safe_dump(raw))
    assert_user_error(run("train", cfg, "--out", tmp_path / "r"), "train.learning_rate", "unknown")
    del raw["train"]["learning_rate"]
    raw["train"]["batch_size"] = "ten"
    cfg.write_text(yaml.safe_dump(raw))
    assert_user_error(run("train", cfg, "--out", tmp_path / "r"), "train.batch_size")
    raw["train"]["batch_size"] = 10
    raw["data"]["scheme"] = "BILOU2"
    cfg.write_text(yaml.safe_dump(raw))
    assert_user_error(run("train", cfg, "--out", tmp_path / "r"), "data.scheme")
    raw["data"]["scheme"] = "BIO"
    cfg.write_text(yaml.safe_dump(raw))
    assert_user_error(run("train", tmp_path / "missing.yaml", "--out", tmp_path / "r"), "missing.yaml", "no such")
    assert_user_error(run("train", cfg, "--out", tmp_path / "r", "--set", "train.nope=1"), "train.nope")


def test_unknown_scheme_in_score(tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("a B-NP B-NP\n")
    assert_user_error(run("score", f, "--scheme", "XYZ"), "XYZ")


def test_missing_files(model_dir, tmp_path):
    model, data = model_dir
    assert_user_error(run("evaluate", tmp_path / "nomodel", data, fresh=True), "nomodel")  # one line from start-up on
    assert_user_error(run("evaluate", model, tmp_path / "nodata.txt"), "nodata.txt")
    assert_user_error(run("predict", model, tmp_path / "nodata.txt"), "nodata.txt")


def test_label_unseen_in_training(model_dir, tmp_path):
    model, _ = model_dir
    f = tmp_path / "new_label.txt"
    f.write_text("Confidence NN B-NP\nin IN B-PP\n\nthe DT B-XYZ\n")
    assert_user_error(run("evaluate", model, f, "--strict"), "new_label.txt:4", "B-XYZ")
    proc = run("evaluate", model, f)  # by default: a warning, and the chunk is a miss, as conlleval scores it
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert "B-XYZ" in proc.stderr and "unseen" in proc.stderr
    assert "processed 3 tokens with 3 phrases" in proc.stdout


def test_empty_sentences_are_skipped(model_dir, tmp_path):
    model, _ = model_dir
    f = tmp_path / "gaps.txt"
    f.write_text("Confidence NN B-NP\n\n\n\nin IN B-PP\n\n\n")
    proc = run("evaluate", model, f)
    assert proc.returncode == 0, proc.stderr
    assert "processed 2 tokens" in proc.stdout


def test_output_paths_are_checked(model_dir, tmp_path):
    model, data = model_dir
    assert_user_error(run("evaluate", model, data, "--output", tmp_path / "missing" / "p.txt"), "no such folder")
    (tmp_path / "adir").mkdir()
    assert_user_error(run("evaluate", model, data, "--output", tmp_path / "adir"), "is a folder")
    proc = run("evaluate", model, data, "--output", tmp_path / "p.txt")
    assert proc.returncode == 0 and (tmp_path / "p.txt").read_text().startswith("Confidence")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # written through a temp file
    afile = tmp_path / "afile"
    afile.write_text("x")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(data).model_dump(mode="json")))
    assert_user_error(run("train", cfg, "--out", afile), "afile", "names a file")
    locked = tmp_path / "locked.txt"
    locked.write_text("Confidence\n")
    locked.chmod(0)
    if os.access(locked, os.R_OK):  # root reads anything: nothing to test
        return
    assert_user_error(run("predict", model, locked), "locked.txt", "cannot read")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["predict", "m", "--nbest", "0"], "1..1000"),
        (["predict", "m", "--batch-size", "-3"], "1..100000"),
        (["evaluate", "m", "d", "--beam", "x"], "1..256"),
        (["train", "c.yaml", "--out", "o", "--max-epochs", "0"], "1..100000"),
        (["serve", "m", "--port", "70000"], "1-65535"),
        (["predict", "m", "--workers", "0"], "--workers: expected an integer in 1..256"),
        (["predict", "m", "--workers", "100000"], "--workers: expected an integer in 1..256"),
        (["serve", "m", "--workers", "0"], "--workers: expected an integer in 1..256"),
        (["serve", "m", "--max-sentences", "0"], "--max-sentences: expected an integer in 1..1000000"),
        (["serve", "m", "--max-body-bytes", "2MB"], "--max-body-bytes: expected an integer in 1..1000000000"),
    ],
)
def test_command_line_numbers_have_ranges(args, needle):
    proc = run(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and needle in proc.stderr, proc.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "{model}", "{data}"],
        ["calibrate", "{model}", "{data}"],
        ["predict", "{model}", "{data}"],
        ["analyze", "{model}", "{data}"],
        ["attention", "{model}", "a b", "--out", "{out}"],
    ],
)
def test_every_command_that_runs_the_network_takes_a_device_and_names_a_bad_one(
    command, shared_tiny_model, tmp_path, capsys
):
    from seqlab.cli import main

    data, model = shared_tiny_model
    args = [a.format(model=model, data=data, out=tmp_path / "a.png") for a in command]
    assert main(["-q", *args, "--device", "tpu"]) == 2
    assert capsys.readouterr().err.strip() == "error: device: expected auto, cpu or cuda, got 'tpu'"
