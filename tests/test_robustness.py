"""A table of bad inputs through the command line: data files, configs, model folders, checkpoints and command
lines (HTTP requests: tests/test_serve.py). Each must end with exit code 2 and one line naming what is wrong (the file and line, or the config key),
no traceback, and nothing written where nothing should be. Runs in-process (``seqlab.cli.main``) to stay fast;
the subprocess path is covered by tests/test_cli.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from seqlab.cli import main
from tests.conftest import SAMPLE, first_sentences, tiny_config


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """A trained tiny model, its data and config, and a run folder with a checkpoint."""
    root = tmp_path_factory.mktemp("robust")
    data = root / "tiny.txt"
    data.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    raw = tiny_config(data).model_dump(mode="json")
    raw["train"]["max_epochs"] = 2
    cfg = root / "tiny.yaml"
    cfg.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert main(["-q", "train", str(cfg), "--out", str(root / "run")]) == 0
    return {"root": root, "data": data, "config": cfg, "model": root / "run" / "model", "run": root / "run"}


def bad_file(root: Path, name: str, content: str | bytes) -> Path:
    path = root / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


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
    ("data-not-utf8", lambda w: ["evaluate", w["model"], bad_file(w["root"], "latin.txt", b"caf\xe9 NN B-NP\n")],
     ["latin.txt:1", "utf-8"]),
    ("data-label-missing", lambda w: ["evaluate", w["model"], bad_file(w["root"], "short.txt", "The DT B-NP\ncat\n")],
     ["short.txt:2"]),
    ("data-bad-tag", lambda w: ["evaluate", w["model"], bad_file(w["root"], "badtag.txt", "The DT X-NP\n")],
     ["badtag.txt:1", "X-NP"]),
    ("data-empty", lambda w: ["evaluate", w["model"], bad_file(w["root"], "empty.txt", "")], ["empty.txt"]),
    ("data-unseen-label-strict", lambda w: ["evaluate", w["model"],
                                            bad_file(w["root"], "unseen.txt", "The DT B-ZZZ\n"), "--strict"],
     ["unseen.txt:1", "B-ZZZ"]),
    ("predict-missing", lambda w: ["predict", w["model"], w["root"] / "nope.txt"], ["nope.txt"]),
    ("predict-not-utf8", lambda w: ["predict", w["model"], bad_file(w["root"], "bin.txt", b"\xff\xfe\x00a\n")],
     ["bin.txt:1"]),
    ("predict-nothing", lambda w: ["predict", w["model"], bad_file(w["root"], "blank.txt", "\n\n")],
     ["no sentences"]),
    # ---- configs ----
    ("config-missing", lambda w: ["train", w["root"] / "nope.yaml", "--out", w["root"] / "o1"], ["nope.yaml"]),
    ("config-not-yaml", lambda w: ["train", bad_file(w["root"], "bad.yaml", "a: [1, 2\n"), "--out",
                                   w["root"] / "o2"], ["bad.yaml"]),
    ("config-a-list", lambda w: ["train", bad_file(w["root"], "list.yaml", "- 1\n- 2\n"), "--out", w["root"] / "o3"],
     ["list.yaml"]),
    ("config-python-tag", lambda w: ["train", bad_file(w["root"], "tag.yaml", "task: !!python/object:os.system ls\n"),
                                     "--out", w["root"] / "o4"], ["tag.yaml"]),
    ("config-unknown-key", lambda w: ["train", config_with(w, "unk.yaml", lambda r: r["train"].update(lrr=1)),
                                      "--out", w["root"] / "o5"], ["train.lrr", "unknown config key"]),
    ("config-negative-lr", lambda w: ["train", config_with(w, "neg.yaml", lambda r: r["train"].update(lr=-1)),
                                      "--out", w["root"] / "o6"], ["train.lr"]),
    ("config-infinite-lr", lambda w: ["train", w["config"], "--set", "train.lr=.inf", "--out", w["root"] / "o7"],
     ["train.lr"]),
    ("config-odd-bilstm", lambda w: ["train", w["config"], "--set", "model.encoders.0.hidden=51", "--out",
                                     w["root"] / "o8"], ["model.encoders.0.hidden"]),
    ("config-huge-hidden", lambda w: ["train", w["config"], "--set", "model.encoders.0.hidden=100000000", "--out",
                                      w["root"] / "o9"], ["model.encoders.0.hidden"]),
    ("config-unknown-type", lambda w: ["train", w["config"], "--set", "model.encoders.0.type=nope", "--out",
                                       w["root"] / "o10"], ["model.encoders.0", "nope"]),
    ("config-set-not-yaml", lambda w: ["train", w["config"], "--set", "train.lr=[1,", "--out", w["root"] / "o11"],
     ["train.lr"]),
    ("config-set-no-equals", lambda w: ["train", w["config"], "--set", "train.lr", "--out", w["root"] / "o12"],
     ["key=value"]),
    ("config-data-missing", lambda w: ["train", config_with(w, "nodata.yaml", lambda r: r["data"].update(
        train=str(w["root"] / "gone.txt"))), "--out", w["root"] / "o13"], ["gone.txt"]),
    ("config-yaml-bomb", lambda w: ["train", bad_file(w["root"], "bomb.yaml", "a: &a [x, x, x, x, x, x, x, x, x]\n"
                                    + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, "
                                              f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, "
                                              f"*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n"
                                              for i in range(8))), "--out", w["root"] / "o14"], ["bomb.yaml"]),
    # ---- model folders ----
    ("model-missing", lambda w: ["predict", w["root"] / "nomodel", w["data"]], ["nomodel"]),
    ("model-empty-folder", lambda w: ["info", model_with(w, "m-empty", lambda f: [p.unlink() for p in f.iterdir()])],
     ["m-empty"]),
    ("model-config-not-json", lambda w: ["info", model_with(w, "m-json", lambda f: (f / "config.json").write_text(
        "{", encoding="utf-8"))], ["config.json"]),
    ("model-config-a-list", lambda w: ["info", model_with(w, "m-list", lambda f: (f / "config.json").write_text(
        "[]", encoding="utf-8"))], ["config.json"]),
    ("model-no-scheme", lambda w: ["info", model_with(w, "m-scheme", lambda f: set_json(
        f / "config.json", lambda d: d.pop("scheme")))], ["scheme"]),
    ("model-integer-tags", lambda w: ["info", model_with(w, "m-tags", lambda f: set_json(
        f / "vocab.json", lambda d: d.update(tags=[1, 2])))], ["tags"]),
    ("model-words-null", lambda w: ["predict", model_with(w, "m-words", lambda f: set_json(
        f / "vocab.json", lambda d: d["features"].update(word=None))), w["data"]], ["features.word"]),
    ("model-truncated-weights", lambda w: ["predict", model_with(w, "m-trunc", lambda f: (f / "model.safetensors")
                                           .write_bytes((f / "model.safetensors").read_bytes()[:500])), w["data"]],
     ["model.safetensors"]),
    ("model-weights-missing", lambda w: ["predict", model_with(w, "m-now", lambda f: (f / "model.safetensors")
                                         .unlink()), w["data"]], ["model.safetensors"]),
    ("model-integer-weights", lambda w: ["predict", model_with(w, "m-int", retype_first_weight), w["data"]],
     ["model.safetensors", "torch.int64", "torch.float32"]),
    ("model-is-a-file", lambda w: ["info", w["data"]], ["tiny.txt"]),
    ("model-bad-zip", lambda w: ["info", bad_file(w["root"], "m.zip", b"PK\x03\x04 not a zip")], ["m.zip"]),
    # ---- checkpoints ----
    ("resume-corrupt-trainer-json", lambda w: ["train", w["config"], "--out", copy_run(
        w, "r1", lambda c: (c / "trainer.json").write_text("{", encoding="utf-8")), "--resume"], ["trainer.json"]),
    ("resume-truncated-trainer-state", lambda w: ["train", w["config"], "--out", copy_run(
        w, "r2", lambda c: (c / "trainer.safetensors").write_bytes(b"\x08")), "--resume"], ["trainer.safetensors"]),
    ("resume-other-optimizer", lambda w: ["train", w["config"], "--set", "train.optimizer=sgd", "--out",
                                          copy_run(w, "r3", lambda c: None), "--resume", "--max-epochs", "3"],
     ["optimi"]),
    ("resume-changed-model", lambda w: ["train", w["config"], "--set", "model.encoders.0.hidden=16", "--out",
                                        copy_run(w, "r4", lambda c: None), "--resume", "--max-epochs", "3"],
     ["model section"]),
    # ---- command lines ----
    ("cli-nbest-zero", lambda w: ["predict", w["model"], w["data"], "--nbest", "0"], ["--nbest", "1..1000"]),
    ("cli-batch-negative", lambda w: ["predict", w["model"], w["data"], "--batch-size", "-3"], ["--batch-size"]),
    ("cli-beam-text", lambda w: ["evaluate", w["model"], w["data"], "--beam", "wide"], ["--beam"]),
    ("cli-beam-on-crf", lambda w: ["evaluate", w["model"], w["data"], "--beam", "4"], ["--beam", "no beam search"]),
    ("cli-max-length-zero", lambda w: ["predict", w["model"], w["data"], "--max-length", "0"], ["--max-length"]),
    ("cli-port", lambda w: ["serve", w["model"], "--port", "70000"], ["port"]),
    ("cli-serve-tampered-model", lambda w: ["serve", model_with(w, "m-serve", lambda f: (f / "vocab.json").write_text(
        "[1]", encoding="utf-8"))], ["vocab.json"]),
    ("cli-unknown-command", lambda w: ["frobnicate"], ["frobnicate"]),
    ("cli-output-into-missing-folder", lambda w: ["evaluate", w["model"], w["data"], "--output",
                                                  w["root"] / "no" / "such" / "out.txt"], ["out.txt"]),
    ("cli-output-onto-a-folder", lambda w: ["evaluate", w["model"], w["data"], "--output", w["root"]], ["robust"]),
    ("cli-train-out-onto-a-file", lambda w: ["train", w["config"], "--out", w["data"]], ["tiny.txt"]),
    ("cli-seeds-garbage", lambda w: ["train", w["config"], "--out", w["root"] / "o15", "--seeds", "1,x"], ["--seeds"]),
]


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
    assert prefixes >= {"data", "predict", "config", "model", "resume", "cli"}
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
