"""A table of bad inputs through the command line: data files, configs, model folders, checkpoints and command
lines (HTTP requests: tests/test_serve.py). Each must end with exit code 2 and one line naming what is wrong (the file
and line, or the config key), no traceback, and nothing written where nothing should be. Runs in-process
(``seqlab.cli.main``) to stay fast; the subprocess path is covered by tests/test_cli.py."""

from __future__ import annotations

import io
import json
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from seqlab.cli import main
from tests.conftest import SAMPLE, first_sentences, tiny_config
from tests.test_cost import sparse_weights, tiny_model, zip_with_big_entry
from tests.test_cost import text as long_line


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> Iterator[dict]:
    """A trained tiny model, its data and config, and a run folder with a checkpoint."""
    root = tmp_path_factory.mktemp("robust")
    data = root / "tiny.txt"
    data.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = tiny_config(data).model_dump(mode="json")
    raw["train"]["max_epochs"] = 2
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["-q", "train", str(cfg), "--out", str(root / "run")]) == 0
    world = {"root": root, "data": data, "config": cfg, "model": root / "run" / "model", "run": root / "run"}
    yield world
    if "taken" in world:
        world["taken"].close()


def bad_file(root: Path, name: str, content: str | bytes) -> Path:
    path = root / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def flat_long(root: Path) -> Path:
    """A short line, then one of 20,000 characters: written by each case that reads it (cases run apart under -n)."""
    return bad_file(root, "flat-long.txt", "短句。\n" + long_line("flat", 20_000) + "\n")


def config_with(world, name: str, edit) -> Path:
    raw = yaml.safe_load(world["config"].read_text(encoding="utf-8"))
    edit(raw)
    return bad_file(world["root"], name, yaml.safe_dump(raw))


def model_with(world, name: str, edit) -> Path:
    folder = world["root"] / name
    if not folder.exists():
        shutil.copytree(world["model"], folder)
        edit(folder)
    return folder


def set_json(path: Path, edit) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc)
    path.write_text(json.dumps(doc), encoding="utf-8")


# (case id, argv maker, needles expected in the one error line)
CASES = [
    # ---- data files ----
    ("data-missing", lambda w: ["evaluate", w["model"], w["root"] / "nope.txt"], ["nope.txt", "no such file"]),
    ("data-is-a-folder", lambda w: ["evaluate", w["model"], w["root"]], ["robust"]),
    (
        "data-not-utf8",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "latin.txt", b"caf\xe9 NN B-NP\n")],
        ["latin.txt:1", "utf-8"],
    ),
    (
        "data-label-missing",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "short.txt", "The DT B-NP\ncat\n")],
        ["short.txt:2"],
    ),
    (
        "data-bad-tag",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "badtag.txt", "The DT X-NP\n")],
        ["badtag.txt:1", "X-NP"],
    ),
    ("data-empty", lambda w: ["evaluate", w["model"], bad_file(w["root"], "empty.txt", "")], ["empty.txt"]),
    (
        "data-unseen-label-strict",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "unseen.txt", "The DT B-ZZZ\n"), "--strict"],
        ["unseen.txt:1", "B-ZZZ"],
    ),
    ("predict-missing", lambda w: ["predict", w["model"], w["root"] / "nope.txt"], ["nope.txt"]),
    (
        "predict-not-utf8",
        lambda w: ["predict", w["model"], bad_file(w["root"], "bin.txt", b"\xff\xfe\x00a\n")],
        ["bin.txt:1"],
    ),
    ("predict-nothing", lambda w: ["predict", w["model"], bad_file(w["root"], "blank.txt", "\n\n")], ["no sentences"]),
    # line ends: \n, \r\n and a lone \r all end a line (so the error is on the third line, not the first)
    (
        "data-cr-only-line-ends",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "cr.txt", b"The DT B-NP\rcat NN I-NP\rsat VBD\r")],
        ["cr.txt:3", "expected 3 columns"],
    ),
    (
        "data-mixed-line-ends",
        lambda w: [
            "evaluate",
            w["model"],
            bad_file(w["root"], "mixed.txt", b"The DT B-NP\r\ncat NN I-NP\rsat VBD B-VP\n\rX Y\r\n"),
        ],
        ["mixed.txt:5", "got 2"],
    ),
    (
        "data-score-cr-only-line-ends",
        lambda w: ["score", bad_file(w["root"], "scored-cr.txt", b"a B-NP B-NP\rb I-NP\r")],
        ["scored-cr.txt:2", "expected 3 columns"],
    ),
    # tags outside the scheme: the file, line and tag, the scheme the file fits and how to convert
    (
        "data-bioes-tag-for-a-bio-model",
        lambda w: [
            "evaluate",
            w["model"],
            bad_file(w["root"], "bioes.txt", "The DT B-NP\ncat NN E-NP\n\nran VBD S-VP\n"),
        ],
        ["bioes.txt:2", "'E-NP' is not a BIO tag", "fit BIOES but the model reads BIO", "E- becomes I-"],
    ),
    (
        "data-bmes-tag-for-a-bio-model",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "bmes.txt", "The DT B-NP\ncat NN M-NP\ndog NN E-NP\n")],
        ["bmes.txt:2", "'M-NP'", "fit BMES"],
    ),
    (
        "data-bioes-tag-calibrate",
        lambda w: [
            "calibrate",
            w["model"],
            bad_file(w["root"], "bioes.txt", "The DT B-NP\ncat NN E-NP\n\nran VBD S-VP\n"),
            "--out",
            w["root"] / "cal-bioes",
        ],
        ["bioes.txt:2", "'E-NP' is not a BIO tag"],
    ),
    (
        "data-untyped-tag",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "untyped.txt", "The DT B-NP\ncat NN I-NP\nsat VBD B\n")],
        ["untyped.txt:3", "'B' has no type"],
    ),
    (
        "data-empty-type",
        lambda w: ["evaluate", w["model"], bad_file(w["root"], "emptytype.txt", "The DT B-\n")],
        ["emptytype.txt:1", "'B-' has an empty type"],
    ),
    (
        "data-score-bioes-declared-bio",
        lambda w: [
            "score",
            bad_file(w["root"], "scored-bioes.txt", "a B-X B-X\nb E-X E-X\n\nc S-Y O\n"),
            "--scheme",
            "BIO",
        ],
        ["scored-bioes.txt:2", "'E-X'", "set --scheme to BIOES"],
    ),
    (
        "data-score-i-and-m-mixed",
        lambda w: ["score", bad_file(w["root"], "scored-mixed.txt", "a B-X B-X\nb I-X M-X\nc E-X E-X\n")],
        ["scored-mixed.txt:2", "mixes I- and M-"],
    ),
    # predict decides the format on the whole input: a CoNLL file with a ragged line is CoNLL, the line an error
    (
        "predict-conll-with-a-ragged-line",
        lambda w: ["predict", w["model"], ragged(w, "ragged.txt", 6)],
        ["ragged.txt:6", "expected 3 columns (as on most lines), got 2"],
    ),
    (
        "predict-conll-ragged-first-line",
        lambda w: ["predict", w["model"], ragged(w, "ragged1.txt", 1)],
        ["ragged1.txt:1", "expected 3 columns (as on most lines)"],
    ),
    (
        "predict-text-told-conll",
        lambda w: [
            "predict",
            w["model"],
            bad_file(w["root"], "prose.txt", "He reckons the deficit will narrow .\nThe pound fell .\n"),
            "--input-format",
            "conll",
        ],
        ["prose.txt:2", "expected 7 columns (as on the first line), got 4"],
    ),
    # ---- configs ----
    ("config-missing", lambda w: ["train", w["root"] / "nope.yaml", "--out", w["root"] / "o1"], ["nope.yaml"]),
    (
        "config-not-yaml",
        lambda w: ["train", bad_file(w["root"], "bad.yaml", "a: [1, 2\n"), "--out", w["root"] / "o2"],
        ["bad.yaml"],
    ),
    (
        "config-a-list",
        lambda w: ["train", bad_file(w["root"], "list.yaml", "- 1\n- 2\n"), "--out", w["root"] / "o3"],
        ["list.yaml"],
    ),
    (
        "config-python-tag",
        lambda w: [
            "train",
            bad_file(w["root"], "tag.yaml", "task: !!python/object:os.system ls\n"),
            "--out",
            w["root"] / "o4",
        ],
        ["tag.yaml"],
    ),
    (
        "config-unknown-key",
        lambda w: ["train", config_with(w, "unk.yaml", lambda r: r["train"].update(lrr=1)), "--out", w["root"] / "o5"],
        ["train.lrr", "unknown config key"],
    ),
    (
        "config-negative-lr",
        lambda w: ["train", config_with(w, "neg.yaml", lambda r: r["train"].update(lr=-1)), "--out", w["root"] / "o6"],
        ["train.lr"],
    ),
    (
        "config-infinite-lr",
        lambda w: ["train", w["config"], "--set", "train.lr=.inf", "--out", w["root"] / "o7"],
        ["train.lr"],
    ),
    (
        "config-odd-bilstm",
        lambda w: ["train", w["config"], "--set", "model.encoders.0.hidden=51", "--out", w["root"] / "o8"],
        ["model.encoders.0.hidden"],
    ),
    (
        "config-huge-hidden",
        lambda w: ["train", w["config"], "--set", "model.encoders.0.hidden=100000000", "--out", w["root"] / "o9"],
        ["model.encoders.0.hidden"],
    ),
    (
        "config-unknown-type",
        lambda w: ["train", w["config"], "--set", "model.encoders.0.type=nope", "--out", w["root"] / "o10"],
        ["model.encoders.0", "nope"],
    ),
    (
        "config-set-not-yaml",
        lambda w: ["train", w["config"], "--set", "train.lr=[1,", "--out", w["root"] / "o11"],
        ["train.lr"],
    ),
    (
        "config-set-no-equals",
        lambda w: ["train", w["config"], "--set", "train.lr", "--out", w["root"] / "o12"],
        ["key=value"],
    ),
    (
        "config-data-missing",
        lambda w: [
            "train",
            config_with(w, "nodata.yaml", lambda r: r["data"].update(train=str(w["root"] / "gone.txt"))),
            "--out",
            w["root"] / "o13",
        ],
        ["gone.txt"],
    ),
    (
        "config-yaml-bomb",
        lambda w: [
            "train",
            bad_file(
                w["root"],
                "bomb.yaml",
                "a: &a [x, x, x, x, x, x, x, x, x]\n"
                + "".join(
                    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, "
                    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                    f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
                    for i in range(8)
                ),
            ),
            "--out",
            w["root"] / "o14",
        ],
        ["bomb.yaml"],
    ),
    # duplicated keys name the key and both lines; deep nesting is refused (no RecursionError)
    (
        "config-duplicate-section",
        lambda w: [
            "train",
            bad_file(w["root"], "dup.yaml", w["config"].read_text(encoding="utf-8") + "train:\n  lr: 0.5\n"),
            "--out",
            w["root"] / "o30",
        ],
        ["dup.yaml:", "duplicated key 'train' (lines "],
    ),
    (
        "config-duplicate-nested-key",
        lambda w: [
            "train",
            bad_file(w["root"], "dupkey.yaml", "data:\n  train: a.txt\n  scheme: BIO\n  train: b.txt\n"),
            "--out",
            w["root"] / "o31",
        ],
        ["dupkey.yaml:4", "duplicated key 'train' (lines 2 and 4)"],
    ),
    (
        "config-deep-flow-yaml",
        lambda w: [
            "train",
            bad_file(w["root"], "deep.yaml", "data: " + "[" * 5000 + "]" * 5000),
            "--out",
            w["root"] / "o32",
        ],
        ["deep.yaml:1", "nested deeper than 64 levels"],
    ),
    (
        "config-deep-block-yaml",
        lambda w: [
            "train",
            bad_file(w["root"], "deepblock.yaml", "".join(" " * i + "a:\n" for i in range(200)) + " " * 200 + "a: 1\n"),
            "--out",
            w["root"] / "o33",
        ],
        ["deepblock.yaml:65", "nested deeper"],
    ),
    (
        "config-recursive-alias",
        lambda w: ["train", bad_file(w["root"], "recursive.yaml", "data: &a [1, *a]\n"), "--out", w["root"] / "o34"],
        ["recursive.yaml:1", "contains it"],
    ),
    (
        "config-set-deep",
        lambda w: ["train", w["config"], "--set", "train.lr=" + "[" * 1000 + "]" * 1000, "--out", w["root"] / "o35"],
        ["--set train.lr"],
    ),
    # tags of another scheme than the declared one
    (
        "config-bio-data-declared-bmes",
        lambda w: ["train", w["config"], "--set", "data.scheme=BMES", "--out", w["root"] / "o36"],
        ["tiny.txt:4", "'I-NP' is not a BMES tag", "set data.scheme to BIO"],
    ),
    (
        "config-bio-data-declared-bioes",
        lambda w: ["train", w["config"], "--set", "data.scheme=BIOES", "--out", w["root"] / "o37"],
        ["tiny.txt:1", "'B-NP'", "no E- or S- tag", "set data.scheme to BIO"],
    ),
    # ---- model folders ----
    ("model-missing", lambda w: ["predict", w["root"] / "nomodel", w["data"]], ["nomodel"]),
    (
        "model-empty-folder",
        lambda w: ["info", model_with(w, "m-empty", lambda f: [p.unlink() for p in f.iterdir()])],
        ["m-empty"],
    ),
    (
        "model-config-not-json",
        lambda w: ["info", model_with(w, "m-json", lambda f: (f / "config.json").write_text("{", encoding="utf-8"))],
        ["config.json"],
    ),
    (
        "model-config-a-list",
        lambda w: ["info", model_with(w, "m-list", lambda f: (f / "config.json").write_text("[]", encoding="utf-8"))],
        ["config.json"],
    ),
    (
        "model-no-scheme",
        lambda w: ["info", model_with(w, "m-scheme", lambda f: set_json(f / "config.json", lambda d: d.pop("scheme")))],
        ["scheme"],
    ),
    (
        "model-integer-tags",
        lambda w: [
            "info",
            model_with(w, "m-tags", lambda f: set_json(f / "vocab.json", lambda d: d.update(tags=[1, 2]))),
        ],
        ["tags"],
    ),
    (
        "model-words-null",
        lambda w: [
            "predict",
            model_with(w, "m-words", lambda f: set_json(f / "vocab.json", lambda d: d["features"].update(word=None))),
            w["data"],
        ],
        ["features.word"],
    ),
    (
        "model-truncated-weights",
        lambda w: [
            "predict",
            model_with(
                w,
                "m-trunc",
                lambda f: (f / "model.safetensors").write_bytes((f / "model.safetensors").read_bytes()[:500]),
            ),
            w["data"],
        ],
        ["model.safetensors"],
    ),
    (
        "model-weights-missing",
        lambda w: ["predict", model_with(w, "m-now", lambda f: (f / "model.safetensors").unlink()), w["data"]],
        ["model.safetensors"],
    ),
    (
        "model-integer-weights",
        lambda w: ["predict", model_with(w, "m-int", retype_first_weight), w["data"]],
        ["model.safetensors", "torch.int64", "torch.float32"],
    ),
    ("model-is-a-file", lambda w: ["info", w["data"]], ["tiny.txt"]),
    ("model-bad-zip", lambda w: ["info", bad_file(w["root"], "m.zip", b"PK\x03\x04 not a zip")], ["m.zip"]),
    # deep JSON is one line in every command that loads a model
    (
        "model-deep-config-json",
        lambda w: [
            "info",
            model_with(
                w,
                "m-deep-config",
                lambda f: (f / "config.json").write_text('{"a": ' * 100_000 + "1" + "}" * 100_000, encoding="utf-8"),
            ),
        ],
        ["config.json", "nested deeper than 64 levels"],
    ),
    (
        "model-deep-vocab-json-predict",
        lambda w: ["predict", model_with(w, "m-deep-vocab", deep_vocab), w["data"]],
        ["vocab.json", "nested deeper"],
    ),
    (
        "model-deep-vocab-json-export",
        lambda w: ["export", model_with(w, "m-deep-vocab", deep_vocab), "--out", w["root"] / "deep.onnx"],
        ["vocab.json", "nested deeper"],
    ),
    (
        "model-deep-vocab-json-calibrate",
        lambda w: [
            "calibrate",
            model_with(w, "m-deep-vocab", deep_vocab),
            w["data"],
            "--out",
            w["root"] / "calibrated-deep",
        ],
        ["vocab.json", "nested deeper"],
    ),
    (
        "model-deep-vocab-json-serve",
        lambda w: ["serve", model_with(w, "m-deep-vocab", deep_vocab)],
        ["vocab.json", "nested deeper"],
    ),
    # ---- checkpoints ----
    (
        "resume-corrupt-trainer-json",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r1", lambda c: (c / "trainer.json").write_text("{", encoding="utf-8")),
            "--resume",
        ],
        ["trainer.json"],
    ),
    (
        "resume-truncated-trainer-state",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r2", lambda c: (c / "trainer.safetensors").write_bytes(b"\x08")),
            "--resume",
        ],
        ["trainer.safetensors"],
    ),
    (
        "resume-other-optimizer",
        lambda w: [
            "train",
            w["config"],
            "--set",
            "train.optimizer=sgd",
            "--out",
            copy_run(w, "r3", lambda c: None),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["optimi"],
    ),
    (
        "resume-changed-model",
        lambda w: [
            "train",
            w["config"],
            "--set",
            "model.encoders.0.hidden=16",
            "--out",
            copy_run(w, "r4", lambda c: None),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["model section"],
    ),
    # values that pass a look at the keys but are wrong
    (
        "resume-string-steps",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r5", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(steps="12"))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.json", "trainer.steps", '"12"'],
    ),
    (
        "resume-negative-epoch",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r6", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(epoch=-1))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.epoch", "-1"],
    ),
    (
        "resume-negative-bad-epochs",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r7", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(bad_epochs=-3))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.bad_epochs"],
    ),
    (
        "resume-nan-best",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r8", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(best=float("nan")))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.best", "nan"],
    ),
    (
        "resume-bool-best-epoch",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r9", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(best_epoch=True))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.best_epoch"],
    ),
    (
        "resume-negative-step-in-epoch",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r10", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(step_in_epoch=-2))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.step_in_epoch"],
    ),
    (
        "resume-infinite-elapsed",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(
                w, "r11", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(elapsed=float("inf")))
            ),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.elapsed"],
    ),
    (
        "resume-history-of-numbers",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r12", lambda c: set_json(c / "trainer.json", lambda d: d["trainer"].update(history=[1, 2]))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.history"],
    ),
    (
        "resume-nan-learning-rate",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(
                w,
                "r13",
                lambda c: set_json(
                    c / "trainer.json", lambda d: d["optimizer"]["param_groups"][0].update(lr=float("nan"))
                ),
            ),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["param_groups[0].lr"],
    ),
    (
        "resume-10-byte-rng-state",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(
                w,
                "r14",
                lambda c: set_tensors(c, lambda t: t.update({"rng.torch": torch.zeros(10, dtype=torch.uint8)})),
            ),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.safetensors", "rng.torch", "10 bytes"],
    ),
    (
        "resume-nan-optimizer-moment",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r15", lambda c: set_tensors(c, lambda t: t[first_moment(t)].fill_(float("nan")))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["trainer.safetensors", "NaN"],
    ),
    (
        "resume-negative-optimizer-step",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(w, "r16", lambda c: set_tensors(c, lambda t: t.update({"optimizer.0.step": torch.tensor(-5.0)}))),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["optimizer.0.step"],
    ),
    (
        "resume-short-rank-rng-state",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(
                w,
                "r18",
                lambda c: set_tensors(c, lambda t: t.update({"extra.rng.rank1": torch.zeros(10, dtype=torch.uint8)})),
            ),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["extra.rng.rank1", "10 bytes"],
    ),
    (
        "resume-state-of-an-unknown-parameter",
        lambda w: [
            "train",
            w["config"],
            "--out",
            copy_run(
                w, "r17", lambda c: set_tensors(c, lambda t: t.update({"optimizer.9999.exp_avg": torch.zeros(3)}))
            ),
            "--resume",
            "--max-epochs",
            "3",
        ],
        ["optimizer.9999.exp_avg"],
    ),
    # ---- command lines ----
    ("cli-nbest-zero", lambda w: ["predict", w["model"], w["data"], "--nbest", "0"], ["--nbest", "1..1000"]),
    ("cli-batch-negative", lambda w: ["predict", w["model"], w["data"], "--batch-size", "-3"], ["--batch-size"]),
    ("cli-beam-text", lambda w: ["evaluate", w["model"], w["data"], "--beam", "wide"], ["--beam"]),
    ("cli-beam-on-crf", lambda w: ["evaluate", w["model"], w["data"], "--beam", "4"], ["--beam", "no beam search"]),
    ("cli-max-length-zero", lambda w: ["predict", w["model"], w["data"], "--max-length", "0"], ["--max-length"]),
    ("cli-port", lambda w: ["serve", w["model"], "--port", "70000"], ["port"]),
    (
        "cli-serve-tampered-model",
        lambda w: ["serve", model_with(w, "m-serve", lambda f: (f / "vocab.json").write_text("[1]", encoding="utf-8"))],
        ["vocab.json"],
    ),
    ("cli-unknown-command", lambda w: ["frobnicate"], ["frobnicate"]),
    (
        "cli-output-into-missing-folder",
        lambda w: ["evaluate", w["model"], w["data"], "--output", w["root"] / "no" / "such" / "out.txt"],
        ["out.txt"],
    ),
    ("cli-output-onto-a-folder", lambda w: ["evaluate", w["model"], w["data"], "--output", w["root"]], ["robust"]),
    ("cli-train-out-onto-a-file", lambda w: ["train", w["config"], "--out", w["data"]], ["tiny.txt"]),
    ("cli-seeds-garbage", lambda w: ["train", w["config"], "--out", w["root"] / "o15", "--seeds", "1,x"], ["--seeds"]),
    (
        "cli-input-format-unknown",
        lambda w: ["predict", w["model"], w["data"], "--input-format", "xml"],
        ["--input-format"],
    ),
    # seeds are refused before a run trains, not after
    (
        "cli-seeds-negative",
        lambda w: ["train", w["config"], "--out", w["root"] / "o16", "--seeds", "-1"],
        ["--seeds", "seed -1", "0..4294967295"],
    ),
    (
        "cli-seeds-over-32-bits",
        lambda w: ["train", w["config"], "--out", w["root"] / "o17", "--seeds", "1,4294967296"],
        ["--seeds", "4294967296"],
    ),
    (
        "cli-seeds-repeated",
        lambda w: ["train", w["config"], "--out", w["root"] / "o18", "--seeds", "1,2,1"],
        ["--seeds", "seed 1 is given twice"],
    ),
    ("cli-seeds-empty", lambda w: ["train", w["config"], "--out", w["root"] / "o19", "--seeds", ","], ["--seeds"]),
    # ---- writers: unwritable places, and what is there of another kind, are one line; nothing is replaced ----
    (
        "write-export-unwritable",
        lambda w: ["export", w["model"], "--out", UNWRITABLE / "m.onnx"],
        ["m.onnx", "cannot write"],
    ),
    (
        "write-calibrate-unwritable",
        lambda w: ["calibrate", w["model"], w["data"], "--out", UNWRITABLE / "m"],
        ["cannot write"],
    ),
    (
        "write-calibrate-onto-a-file",
        lambda w: ["calibrate", w["model"], w["data"], "--out", bad_file(w["root"], "notes.txt", "mine\n")],
        ["notes.txt", "is a file"],
    ),
    (
        "write-calibrate-onto-another-folder",
        lambda w: ["calibrate", w["model"], w["data"], "--out", other_folder(w)],
        ["mine", "folder of something else"],
    ),
    (
        "write-calibrate-onto-a-non-model-zip",
        lambda w: ["calibrate", w["model"], w["data"], "--out", bad_file(w["root"], "notes.zip", "mine\n")],
        ["notes.zip", "not a seqlab model archive"],
    ),
    (
        "write-evaluate-output-unwritable",
        lambda w: ["evaluate", w["model"], w["data"], "--output", UNWRITABLE / "out.txt"],
        ["out.txt", "cannot write"],
    ),
    # ---- serve: every start-up failure is one line, with or without --workers, before the model loads ----
    ("serve-port-in-use", lambda w: ["serve", w["model"], "--port", taken_port(w)], ["Address already in use"]),
    (
        "serve-port-in-use-workers",
        lambda w: ["serve", w["model"], "--port", taken_port(w), "--workers", "2"],
        ["Address already in use"],
    ),
    (
        "serve-host-not-here",
        lambda w: ["serve", w["model"], "--host", "192.0.2.1", "--port", "8000"],
        ["192.0.2.1:8000", "cannot listen"],
    ),  # TEST-NET-1: an address no machine has, no DNS asked
    # ---- cost: a small input that would cost gigabytes is refused before it is allocated (tests/test_cost.py
    # asserts the same under a memory limit) ----
    (
        "cost-predict-flat-sentence-over-the-budget",
        lambda w: [
            "predict",
            tiny_model("flat", w["root"]),
            flat_long(w["root"]),
        ],
        ["flat-long.txt:2: a sentence of 20000 tokens", "memory budget", "--max-length"],
    ),
    (
        "cost-predict-psa-sentence-over-the-budget",
        lambda w: [
            "predict",
            tiny_model("psa", w["root"]),
            bad_file(w["root"], "psa-long.txt", long_line("psa", 20_000) + "\n"),
        ],
        ["psa-long.txt:1", "--max-length"],
    ),
    (
        "cost-predict-piece-over-the-budget",
        lambda w: [
            "predict",
            tiny_model("flat", w["root"]),
            flat_long(w["root"]),
            "--max-length",
            "15000",
        ],
        ["flat-long.txt:2", "--max-length"],
    ),
    (
        "cost-evaluate-sentence-over-the-budget",
        lambda w: [
            "evaluate",
            tiny_model("flat", w["root"]),
            bad_file(w["root"], "long.bmes", "中 O\n国 O\n\n" + "".join(f"{c} O\n" for c in long_line("flat", 9000))),
        ],
        ["long.bmes:4: a sentence of 9000 tokens", "--max-length"],
    ),
    (
        "cost-evaluate-max-length-zero",
        lambda w: ["evaluate", w["model"], w["data"], "--max-length", "0"],
        ["--max-length"],
    ),
    (
        "cost-model-config-hidden-16384",
        lambda w: [
            "info",
            model_with(
                w,
                "m-wide",
                lambda f: set_json(
                    f / "config.json", lambda d: d["config"]["model"]["encoders"][0].update(hidden=16384)
                ),
            ),
        ],
        ["model.safetensors does not fit the config", "the network needs [32768, "],
    ),
    (
        "cost-model-config-over-the-parameter-limit",
        lambda w: [
            "info",
            model_with(
                w,
                "m-huge",
                lambda f: set_json(
                    f / "config.json", lambda d: d["config"]["model"]["encoders"][0].update(hidden=16384, layers=4)
                ),
            ),
        ],
        ["config.json: the network it describes has", "bytes of parameters"],
    ),
    (
        "cost-model-sparse-3-gib-weights",
        lambda w: ["predict", model_with(w, "m-sparse", sparse_weights), w["data"]],
        ["model.safetensors is 3,221,225,472 bytes", "bytes of weights"],
    ),
    (
        "cost-model-zip-entry-of-1-gib",
        lambda w: ["info", zip_with_big_entry(w["model"], w["root"] / "bomb.zip")],
        ["bomb.zip", "model.safetensors is 1,073,741,824 bytes"],
    ),
    (
        "cost-model-safetensors-header-length",
        lambda w: [
            "info",
            model_with(
                w,
                "m-header",
                lambda f: (f / "model.safetensors").write_bytes(
                    b"\xff" * 8 + (f / "model.safetensors").read_bytes()[8:]
                ),
            ),
        ],
        ["model.safetensors", "a header of 18446744073709551615 bytes"],
    ),
]

#: A folder no user can create files in (procfs), root included.
UNWRITABLE = Path("/proc")


def set_tensors(checkpoint: Path, edit) -> None:
    """Edit a checkpoint's trainer.safetensors in place."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(checkpoint / "trainer.safetensors")
    edit(tensors)
    save_file(tensors, checkpoint / "trainer.safetensors")


def first_moment(tensors: dict) -> str:
    return min(k for k in tensors if k.startswith("optimizer.") and k.endswith(".exp_avg"))


def other_folder(world) -> Path:
    """A folder of the user's that is not a model."""
    folder = world["root"] / "mine"
    folder.mkdir(exist_ok=True)
    (folder / "notes.txt").write_text("mine\n", encoding="utf-8")
    return folder


def taken_port(world) -> str:
    """A loopback port that a listening socket of this test module holds."""
    import socket

    if "taken" not in world:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        world["taken"] = sock
    return str(world["taken"].getsockname()[1])


def ragged(world, name: str, line: int) -> Path:
    """The tiny CoNLL file with one line (1-based) short of its middle column."""
    lines = world["data"].read_text(encoding="utf-8").split("\n")
    token, _, label = lines[line - 1].split()
    lines[line - 1] = f"{token} {label}"
    return bad_file(world["root"], name, "\n".join(lines))


def deep_vocab(folder: Path) -> None:
    """vocab.json, valid but for one value nested 5,000 levels deep."""
    text = (folder / "vocab.json").read_text(encoding="utf-8")
    (folder / "vocab.json").write_text(
        '{"deep": ' + "[" * 5000 + "]" * 5000 + ", " + text.lstrip()[1:], encoding="utf-8"
    )


def retype_first_weight(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(folder / "model.safetensors")
    first = sorted(weights)[0]
    weights[first] = weights[first].long()  # same name and shape, wrong dtype
    save_file(weights, folder / "model.safetensors")


def copy_run(world, name: str, edit) -> Path:
    folder = world["root"] / name
    if not folder.exists():
        shutil.copytree(world["run"], folder)
        edit(folder / "checkpoint")
    return folder


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_one_line_and_exit_2(world, case, capsys):
    _, make_argv, needles = case
    argv = ["-q", *map(str, make_argv(world))]
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse
        code = exit_.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, err
    assert "Traceback" not in err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_the_table_covers_every_category():
    prefixes = {c[0].split("-")[0] for c in CASES}
    assert prefixes >= {"data", "predict", "config", "model", "resume", "cli", "write", "serve"}
    assert len(CASES) >= 45


def test_bulk_predict_streams_in_bounded_chunks_and_keeps_order(world, tmp_path, capsys, monkeypatch):
    from seqlab.tagger import Tagger

    sizes = []
    real = Tagger.predict_tags

    def spy(self, sentences, *args, **kwargs):
        sizes.append(len(sentences))
        return real(self, sentences, *args, **kwargs)

    monkeypatch.setattr(Tagger, "predict_tags", spy)
    big = tmp_path / "big.txt"
    with big.open("w", encoding="utf-8") as f:
        for i in range(3000):  # far more than one chunk or one batch
            f.write(f"Sentence number {i} rose .\n")
    capsys.readouterr()
    assert main(["-q", "predict", str(world["model"]), str(big), "--chunk", "250"]) == 0
    out = capsys.readouterr().out
    blocks = [b.splitlines() for b in out.strip().split("\n\n")]
    assert len(blocks) == 3000 and max(sizes) == 250 and len(sizes) == 12
    assert [b[2].split()[0] for b in blocks] == [str(i) for i in range(3000)]  # input order


# ---- writers: one recovery path ----


@pytest.mark.parametrize(
    "make_target",
    [
        lambda root: bad_file(root, "keep.txt", "mine\n"),
        lambda root: bad_file(root, "keep.zip", "mine\n"),
        lambda root: (root / "keep").mkdir() or bad_file(root / "keep", "notes.txt", "mine\n").parent,
    ],
    ids=["file", "zip", "folder"],
)
def test_calibrate_never_replaces_what_is_not_a_model(world, tmp_path, make_target, capsys):
    target = make_target(tmp_path)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["-q", "calibrate", str(world["model"]), str(world["data"]), "--out", str(target)]) == 2
    assert "refusing to replace it" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing moved aside, nothing added
    assert "mine" in (target / "notes.txt" if target.is_dir() else target).read_text(encoding="utf-8")


def killed_inside_swap(world, root: Path) -> Path:
    """``seqlab calibrate`` on a copy of the model, killed (``os._exit``, as kill -9: no clean-up runs) between
    the two renames of its folder swap: no model folder is left, only the set-aside old one and the filled new
    one beside it. Returns the model path."""
    model = root / "model"
    shutil.copytree(world["model"], model)
    script = (
        "import os, sys\n"
        "real = os.replace\n"
        "def replace(src, dst):\n"
        "    real(src, dst)\n"
        "    if str(dst).endswith('.old'):\n"
        "        os._exit(137)  # the old folder is aside, the new one not yet in\n"
        "os.replace = replace\n"
        "from seqlab.cli import main\n"
        f"sys.exit(main(['-q', 'calibrate', {str(model)!r}, {str(world['data'])!r}]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 137, done.stderr[-800:]
    assert not model.exists()
    assert sorted(p.suffix for p in root.iterdir()) == [".old", ".tmp"]
    return model


@pytest.fixture(scope="module")
def killed(world, tmp_path_factory) -> Path:
    """A folder holding what a kill inside calibrate's swap leaves (made once, copied by each test)."""
    return killed_inside_swap(world, tmp_path_factory.mktemp("killed")).parent


@pytest.mark.parametrize(
    "reader",
    [
        lambda m, w: main(["-q", "info", str(m)]),
        lambda m, w: main(["-q", "predict", str(m), str(w["data"])]),
        lambda m, w: main(["-q", "evaluate", str(m), str(w["data"])]),
        lambda m, w: main(["-q", "calibrate", str(m), str(w["data"])]),
        lambda m, w: __import__("seqlab.tagger").tagger.Tagger.load(m) and 0,
    ],
    ids=["info", "predict", "evaluate", "calibrate", "Tagger.load"],
)
def test_a_kill_inside_calibrates_swap_is_recovered_by_the_next_reader(world, killed, tmp_path, reader, capsys):
    from seqlab.tagger import Tagger

    root = tmp_path / "copy"
    shutil.copytree(killed, root)
    model = root / "model"
    assert reader(model, world) == 0
    assert sorted(p.name for p in root.iterdir()) == ["model"]  # the new copy in place, the old one gone
    assert not (model / ".complete").exists()
    calibrated = Tagger.load(model).info()["temperature"]
    assert calibrated != Tagger.load(world["model"]).info()["temperature"]  # the newer, calibrated copy


def test_a_swap_killed_with_only_the_old_copy_left_gets_it_back(world, tmp_path):
    """A temp folder without the completion marker was being filled: never used; the old copy comes back."""
    from seqlab.tagger import Tagger

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    shutil.copytree(world["model"], tmp_path / f".model.{dead.stdout.strip()}.old")
    shutil.copytree(world["model"], tmp_path / ".model.half_filled.tmp")
    (tmp_path / ".model.half_filled.tmp" / "model.safetensors").write_bytes(b"\x08")
    Tagger.load(tmp_path / "model")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".model.half_filled.tmp", "model"]


# ---- checkpoints: the optimiser state against the parameters ----


def test_check_optimizer_state_names_a_tensor_of_another_shape(world):
    from seqlab.errors import SeqlabError
    from seqlab.tagger import Tagger
    from seqlab.training.checkpoint import check_optimizer_state, load_checkpoint

    folder = world["run"] / "checkpoint"
    checkpoint = load_checkpoint(folder)
    optimizer = torch.optim.Adam([p for p in Tagger.load(folder).net.parameters() if p.requires_grad])
    check_optimizer_state(optimizer, checkpoint.optimizer, folder)  # the run's own state fits
    state = checkpoint.optimizer["state"][0]
    good = state["exp_avg"]
    state["exp_avg"] = torch.zeros(3)
    with pytest.raises(SeqlabError, match=r"optimizer\.0\.exp_avg' has shape \[3\], expected the parameter's shape"):
        check_optimizer_state(optimizer, checkpoint.optimizer, folder)
    state["exp_avg"] = good
    state["step"] = torch.zeros(2)
    with pytest.raises(SeqlabError, match="expected a scalar"):
        check_optimizer_state(optimizer, checkpoint.optimizer, folder)


def test_resume_with_an_optimizer_tensor_of_another_shape_is_one_line(world, capsys):
    def reshape(tensors):
        name = first_moment(tensors)
        tensors[name] = torch.zeros(3)

    run = copy_run(world, "r-shape", lambda c: set_tensors(c, reshape))
    capsys.readouterr()
    code = main(["-q", "train", str(world["config"]), "--out", str(run), "--resume", "--max-epochs", "3"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and "has shape [3]" in lines[0], lines


# ---- inputs read as what they are: any line ending, and predict's format on the whole input's evidence ----


def with_line_ends(path: Path, ending: str, name: str) -> Path:
    """A copy of ``path`` (next to it) whose line ends are ``ending``."""
    return bad_file(path.parent, name, path.read_text(encoding="utf-8").replace("\n", ending).encode("utf-8"))


@pytest.mark.parametrize("ending", ["\r\n", "\r"], ids=["crlf", "cr"])
def test_every_reader_takes_any_line_ending_as_a_newline(world, tmp_path, capsys, monkeypatch, ending):
    from seqlab.config import load_config
    from seqlab.data.corpus import load_corpus

    def out(*argv) -> str:
        capsys.readouterr()
        assert main(["-q", *map(str, argv)]) == 0
        return capsys.readouterr().out

    other = with_line_ends(world["data"], ending, f"tiny-{len(ending)}.txt")
    assert out("evaluate", world["model"], other) == out("evaluate", world["model"], world["data"])
    assert out("predict", world["model"], other) == out("predict", world["model"], world["data"])
    predictions = tmp_path / "pred.txt"
    out("evaluate", world["model"], world["data"], "--output", predictions)
    assert out("score", with_line_ends(predictions, ending, "pred-2.txt")) == out("score", predictions)
    text = "He reckons the deficit will narrow .\nThe pound fell .\n"
    tagged = []
    for stdin in (text.replace("\n", ending), text):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
        tagged.append(out("predict", world["model"], "-"))
    assert tagged[0] == tagged[1] and tagged[0].count("\n\n") == 2
    data = load_config(world["config"]).data  # train reads its files with the same reader
    corpora = [
        load_corpus(d)
        for d in (data, data.model_copy(update={"train": str(other), "dev": str(other), "test": str(other)}))
    ]
    assert [(s.tokens, s.labels, s.line) for s in corpora[0].train] == [
        (s.tokens, s.labels, s.line) for s in corpora[1].train
    ]


def test_predict_weighs_the_whole_input_says_what_it_chose_and_obeys_input_format(
    world, tmp_path, capsys, caplog, monkeypatch
):
    def sentences(*argv) -> list[list[str]]:
        capsys.readouterr()
        assert main(["-q", "predict", str(world["model"]), *map(str, argv), "--output-format", "jsonl"]) == 0
        return [json.loads(line)["tokens"] for line in capsys.readouterr().out.splitlines()]

    paragraphs = bad_file(
        tmp_path,
        "zh.txt",
        "今天天气很好我们一起去公园散步\n然后回家吃饭晚上看了一部电影\n\n明天还要上班所以早点休息\n\n",
    )
    with caplog.at_level(logging.INFO, logger="seqlab"):
        assert len(sentences(paragraphs)) == 3  # raw text, one sentence per line: not one token per line
    assert f"{paragraphs}: read as raw text" in caplog.text
    assert [len(s) for s in sentences(paragraphs, "--input-format", "conll")] == [2, 1]  # told: one token a line
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="seqlab"):
        assert len(sentences(world["data"])) == 20
    assert f"{world['data']}: read as CoNLL columns: 3 column(s)" in caplog.text
    lines = [ln for ln in world["data"].read_text(encoding="utf-8").splitlines() if ln.strip()]
    assert sentences(world["data"], "--input-format", "text") == [ln.split() for ln in lines]
    assert sentences(world["data"], "--input-format", "raw") == [ln.split() for ln in lines]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(world["data"].read_bytes())))
    assert len(sentences("-")) == 20  # stdin: decided on its first lines
