"""Named models (seqlab.tagging.named_models): a model argument that is a name is found in $SEQLAB_MODELS (then the
repository's models/); every command and Tagger.load take one; `seqlab models` lists them; an unknown name is one
line listing the known names, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from seqlab.cli import main
from seqlab.errors import SeqlabError
from seqlab.tagging.named_models import ENV, available, resolve_model

CARD = {
    "name": "tiny-chunk",
    "language": "en",
    "task": "chunking",
    "description": "a test chunker",
    "data": {"name": "20 CoNLL-2000 sentences"},
    "recipe": {"config": "tests/conftest.py"},
    "scores": {"test": {"metric": "f1", "value": 61.25, "paper": 93.5}},
}


def _outside_the_repository(found):
    """The named models of $SEQLAB_MODELS: those of the repository's models/ folder set aside."""
    from seqlab.tagging.named_models import repository_models

    return [m for m in found if m.path.parent != repository_models()]


@pytest.fixture
def models(shared_tiny_model, tmp_path, monkeypatch) -> Path:
    """$SEQLAB_MODELS with two named copies of the shared tiny chunker (one with a model card), and a folder that
    is no model."""
    root = tmp_path / "zoo"
    root.mkdir()
    _, model = shared_tiny_model
    shutil.copytree(model, root / "tiny-chunk")
    (root / "tiny-chunk" / "card.json").write_text(json.dumps(CARD), encoding="utf-8")
    (root / "tiny-chunk" / "card.md").write_text("# tiny-chunk\n\nA chunker for the tests.\n", encoding="utf-8")
    shutil.copytree(model, root / "other")
    (root / "notes").mkdir()
    monkeypatch.setenv(ENV, str(root))
    monkeypatch.chdir(tmp_path)
    return root


def test_names_resolve_and_load(models, shared_tiny_model):
    from seqlab.tagger import Tagger

    assert resolve_model("tiny-chunk") == models / "tiny-chunk"
    _, model = shared_tiny_model
    assert resolve_model(model) == model  # a path stays a path
    (Path("tiny-chunk")).mkdir()  # a folder of that name here wins over the name (it is a path)
    assert resolve_model("tiny-chunk") == Path("tiny-chunk")
    Path("tiny-chunk").rmdir()
    tagger = Tagger.load("tiny-chunk")
    assert tagger.predict(["He reckons the current account deficit will narrow ."])[0].spans
    with pytest.raises(SeqlabError) as info:
        Tagger.load("en-nerr")
    message = str(info.value)  # the repository's own models/ are known names too
    assert message.startswith("no such model folder or model name 'en-nerr' (known names: ") and message.endswith(")")
    assert {"other", "tiny-chunk"} <= set(message.split("known names: ")[1][:-1].split(", "))
    with pytest.raises(SeqlabError, match="no such model"):
        Tagger.load("runs/missing/model")  # a path: the loader's own message
    assert [m.name for m in _outside_the_repository(available())] == ["other", "tiny-chunk"]


def test_search_order(models, tmp_path, monkeypatch, shared_tiny_model):
    first = tmp_path / "first"
    first.mkdir()
    shutil.copytree(shared_tiny_model[1], first / "other")
    import os

    monkeypatch.setenv(ENV, os.pathsep.join([str(first), str(models)]))
    assert resolve_model("other") == first / "other"
    assert [m.path for m in _outside_the_repository(available())] == [first / "other", models / "tiny-chunk"]


def test_commands_take_a_name(models, shared_tiny_model, capsys, tmp_path):
    data, _ = shared_tiny_model
    assert main(["-q", "info", "tiny-chunk"]) == 0
    assert json.loads(capsys.readouterr().out)["task"] == "chunking"
    assert main(["-q", "evaluate", "tiny-chunk", str(data)]) == 0
    assert "accuracy" in capsys.readouterr().out
    raw = tmp_path / "raw.txt"
    raw.write_text("He reckons the current account deficit will narrow .\n", encoding="utf-8")
    assert main(["-q", "predict", "tiny-chunk", str(raw)]) == 0
    assert "B-NP" in capsys.readouterr().out
    assert main(["-q", "predict", "no-such-name", str(raw)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no such model folder or model name 'no-such-name' (known names: ")
    assert {"other", "tiny-chunk"} <= set(err.strip()[:-1].split("known names: ")[1].split(", "))
    assert main(["-q", "calibrate", "other", str(data), "--out", str(tmp_path / "cal")]) == 0
    assert (tmp_path / "cal" / "model.safetensors").is_file()
    assert main(["-q", "export", "tiny-chunk", "--format", "torchscript", "--out", str(tmp_path / "m.pt")]) == 0
    assert (tmp_path / "m.pt").is_file()


def test_serve_gets_the_folder_of_a_name(models, monkeypatch):
    """serve hands its workers an absolute path: a name is resolved first."""
    import seqlab.serving.serve

    called = []
    monkeypatch.setattr(seqlab.serving.serve, "run_server", lambda model, *args: called.append(model))
    assert main(["-q", "serve", "tiny-chunk"]) == 0
    assert called == [str(models / "tiny-chunk")]


def test_models_command(models, capsys, monkeypatch, tmp_path):
    assert main(["-q", "models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "LANGUAGE", "TASK", "TEST", "SIZE", "FOLDER"]
    rows = {line.split()[0]: line.split() for line in lines[1:]}  # the repository's own models are listed too
    assert rows["other"][:3] == ["other", "-", "-"]
    assert rows["tiny-chunk"][:7] == ["tiny-chunk", "en", "chunking", "f1", "61.25", "(paper", "93.50)"]
    assert rows["tiny-chunk"][8:] == ["KB", str(models / "tiny-chunk")]  # the model files' size on disk
    assert main(["-q", "models", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    tiny = next(m for m in listed if m["name"] == "tiny-chunk")
    assert tiny["card"] == CARD and tiny["size_bytes"] > 0
    assert main(["-q", "models", "tiny-chunk"]) == 0
    assert capsys.readouterr().out.startswith("# tiny-chunk")
    (models / "other" / "card.json").write_text("{not json", encoding="utf-8")
    assert main(["-q", "models"]) == 0
    assert "card.json unreadable" in capsys.readouterr().out
    monkeypatch.setenv(ENV, str(tmp_path / "empty"))
    monkeypatch.setattr("seqlab.tagging.named_models.repository_models", lambda: tmp_path / "none")
    assert main(["-q", "models"]) == 0
    assert capsys.readouterr().out.startswith("no named models")
    assert main(["-q", "info", "en-ner"]) == 2
    assert "no named models are installed" in capsys.readouterr().err
