"""``seqlab predict --workers N``: the same bytes as one process, in input order, options applied in the workers,
bad input still one line with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqlab.cli import main
from seqlab.errors import SeqlabError
from seqlab.serving.parallel import PredictOptions, tag_in_processes
from tests.test_cli import assert_user_error, run

WORDS = ["Stocks", "of", "the", "company", "rose", "sharply", "on", "Monday", "in", "New", "York", "trading"]


def raw_text(n: int) -> str:
    """``n`` short sentences of 3..9 tokens (uneven lengths: chunks take uneven times)."""
    return "".join(" ".join(WORDS[(i + k) % len(WORDS)] for k in range(1 + i % 7)) + f" {i} .\n" for i in range(n))


def predict(capsys, *args) -> str:
    """``seqlab predict ARGS`` in this process (its workers are real processes); returns its stdout."""
    capsys.readouterr()
    assert main(["-q", "predict", *map(str, args)]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize(
    "n,extra",
    [
        (2000, ["--output-format", "conll"]),
        (500, ["--output-format", "jsonl", "--nbest", "2", "--max-length", "6"]),  # n-best lists, split sentences
    ],
)
def test_workers_write_the_same_bytes_as_one_process(shared_tiny_model, tmp_path, capsys, n, extra):
    model = shared_tiny_model[1]
    data = tmp_path / "big.txt"
    data.write_text(raw_text(n), encoding="utf-8")
    one = predict(capsys, model, data, "--chunk", "100", *extra)
    two = predict(capsys, model, data, "--chunk", "100", "--workers", "2", *extra)
    assert two == one  # byte for byte (the same chunks, hence the same batches), input order kept over 5..20 chunks
    if "jsonl" in extra:
        preds = [json.loads(line) for line in two.splitlines()]
        assert len(preds) == n and [p["tokens"][-2] for p in preds] == [str(i) for i in range(n)]
        assert all(len(p["nbest"]) == 2 for p in preds if not p["split_at"])  # split ones have none
        assert any(p["split_at"] for p in preds)  # --max-length applied
    else:
        blocks = two.strip().split("\n\n")
        assert len(blocks) == n and [b.splitlines()[-2].split()[0] for b in blocks] == [str(i) for i in range(n)]


def test_a_bad_line_is_one_line_error_after_the_chunks_before_it(shared_tiny_model, tmp_path, capsys):
    model = shared_tiny_model[1]
    data = tmp_path / "bad.conll"
    good = "".join(f"Sales NNS\nrose VBD\n{i} CD\n\n" for i in range(500))  # lines 1..2000
    data.write_text(good + "Sales NNS extra\n", encoding="utf-8")  # line 2001: three columns
    assert main(["-q", "predict", str(model), str(data), "--chunk", "50"]) == 2
    one = capsys.readouterr().out
    two = run("predict", model, data, "--chunk", "50", "--workers", "2")  # the real command line: its stderr
    assert_user_error(two, "bad.conll:2001", "expected 2 columns")
    assert two.stdout == one and one.count("\n\n") == 500  # the chunks before the error, as one process writes


def test_an_error_in_a_worker_comes_back_as_seqlab_error(tmp_path):
    from seqlab.data.sentence import Sentence

    written = []
    with pytest.raises(SeqlabError, match="nomodel"):
        tag_in_processes(tmp_path / "nomodel", iter([[Sentence(["a", "b"])]]), PredictOptions(), 1, written.append)
    assert written == []


@pytest.fixture(scope="module")
def gcdt_model(tmp_path_factory) -> Path:
    """A barely trained GCDT tagger (beam-search decoder): greedy and beam search disagree on some sentences."""
    from seqlab.config import config_from_dict
    from tests.conftest import tiny_config, train_tiny

    def config(path):
        raw = tiny_config(path).model_dump(mode="json")
        raw["model"]["encoders"] = [{"type": "dt", "hidden": 16, "transitions": 1, "dropout": 0.0}]
        raw["model"]["decoder"] = {
            "type": "label_dt",
            "hidden": 16,
            "label_dim": 8,
            "transitions": 1,
            "beam": 4,
            "dropout": 0.0,
        }
        raw["train"]["max_epochs"] = 2
        return config_from_dict(raw)

    return train_tiny(tmp_path_factory, "gcdt-workers", config)[1] / "model"


def test_beam_applies_in_the_workers(gcdt_model, tmp_path, capsys):
    from seqlab.data.readers import chunked, read_raw
    from seqlab.serving.parallel import render_chunk
    from seqlab.tagger import Tagger

    data = tmp_path / "text.txt"
    data.write_text(raw_text(100), encoding="utf-8")
    tagger = Tagger.load(gcdt_model)

    def one_process() -> str:
        return "".join(render_chunk(tagger, chunk, PredictOptions("jsonl")) for chunk in chunked(read_raw(data), 25))

    with_model_beam = one_process()  # the config's beam, 4
    tagger.set_beam(1)
    greedy = one_process()
    assert greedy != with_model_beam  # greedy search disagrees with the beam somewhere
    assert (
        predict(capsys, gcdt_model, data, "--chunk", "25", "--beam", 1, "--output-format", "jsonl", "--workers", 2)
        == greedy
    )  # so the workers did use --beam 1
