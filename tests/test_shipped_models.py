"""Each named model shipped under models/ loads by its name and tags a sentence of its language; its card holds
what `seqlab models` shows, and its size stays small (weights in half precision where a recipe says so, packaged
only when not one test tag changes: models/build.py)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import struct
import sys
from pathlib import Path

import pytest
import torch

from seqlab import Tagger
from seqlab.features import contextual, multilingual_e5

MODELS = Path(__file__).resolve().parents[1] / "models"
SHIPPED = sorted(p.name for p in MODELS.iterdir() if (p / "card.json").is_file()) if MODELS.is_dir() else []
SENTENCES = {
    "en": "John Smith flew from New York to Berlin to meet the board of Siemens on Monday .",
    "zh": "张伟毕业于北京大学，现任华为技术有限公司高级工程师。",
}
EXPECTED = {"en": {"ner": "PER", "chunking": "NP", "pos": None}, "zh": {"ner": None}}


def test_the_named_models_are_shipped():
    names = {
        "en-ner",
        "en-ner-minilm",
        "en-chunk",
        "en-pos",
        "zh-ner-resume",
        "zh-ner-resume-e5",
        "zh-ner-ontonotes",
        "zh-ner-ontonotes-e5",
    }
    assert names <= set(SHIPPED), SHIPPED


EXTRAS = {  # a contextual feature's model: the module its image comes in, and the extra that installs it
    multilingual_e5.NAME: (multilingual_e5.PACKAGE, "multilingual"),
    contextual.PACKAGED: (contextual.PACKAGED.replace("-", "_"), "transformers"),
}


def skip_without_its_extras(name: str) -> None:
    """Skip, saying why, a model whose features need a package that is not installed (transformers, and the
    package that ships its transformer's image)."""
    config = json.loads((MODELS / name / "config.json").read_text(encoding="utf-8"))["config"]
    for feature in config["model"]["embedder"]["features"].values():
        if feature and feature["type"] == "contextual":
            package, extra = EXTRAS[feature["model"]]
            reason = f"{name} needs the extra: pip install 'seqlab[{extra}]'"
            pytest.importorskip("transformers", reason=reason)
            pytest.importorskip(package, reason=reason)


@pytest.mark.parametrize("name", SHIPPED)
def test_a_named_model_loads_by_name_and_tags_its_language(name):
    skip_without_its_extras(name)
    card = json.loads((MODELS / name / "card.json").read_text(encoding="utf-8"))
    assert card["name"] == name and card["scores"]["test"]["value"] > 50
    assert card["size_bytes"] < 30_000_000
    speed = card["speed"]  # measured when packaged: the card says how fast it tags, where and when
    assert speed["batch_64_sentences_per_s"] > 0 and speed["batch_1_sentences_per_s"] > 0 and speed["measured"]
    tagger = Tagger.load(name)
    [prediction] = tagger.predict([SENTENCES[card["language"]]])
    labels = prediction.tags
    assert len(labels) > 5 and len(set(labels)) > 1, labels  # a real tagging, not one label everywhere
    wanted = EXPECTED[card["language"]].get(card["task"])
    if wanted:
        assert any(wanted in label for label in labels), labels


def test_models_lists_every_shipped_model(capsys):
    from seqlab.cli import main

    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in SHIPPED:
        assert name in out


def _dtypes(folder: Path) -> dict[str, str]:
    """Each tensor's dtype in a model.safetensors header."""
    with open(folder / "model.safetensors", "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    return {k: e["dtype"] for k, e in header.items() if k != "__metadata__"}


@pytest.mark.parametrize("name", SHIPPED)
def test_the_card_says_how_the_weights_are_stored(name):
    """card.json's weights_dtype is what model.safetensors holds (float16_tensors: those in float16, the others in
    float32); a half-precision model records the test set on which not one tag changed, and loads with float32
    parameters."""
    card = json.loads((MODELS / name / "card.json").read_text(encoding="utf-8"))
    dtypes = _dtypes(MODELS / name)
    if card["weights_dtype"] == "float16+float32":
        assert {k for k, d in dtypes.items() if d == "F16"} == set(card["float16_tensors"])
        assert {d for k, d in dtypes.items() if k not in card["float16_tensors"]} == {"F32"}
    else:
        assert set(dtypes.values()) == {{"float32": "F32", "float16": "F16"}[card["weights_dtype"]]}
    if card["weights_dtype"] != "float32":
        skip_without_its_extras(name)
        check = card["weights_check"]
        # a whole test set: Resume's is 477 sentences, 15,100 characters
        assert check["differ"] == 0 and check["sentences"] > 400 and check["tokens"] > 10_000, check
        assert check["result"].startswith("0 tags differ")
        assert {t.dtype for t in Tagger.load(name).net.state_dict().values()} == {torch.float32}


def _build(monkeypatch):
    """models/build.py as a module."""
    spec = importlib.util.spec_from_file_location("models_build", MODELS / "build.py")
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_packaging_in_half_precision_checks_every_test_tag(shared_tiny_model, tmp_path, monkeypatch):
    """models/build.py package with a float16 recipe, on the tiny chunker's run: packaged in float16 with the check
    in its card; a model whose half-precision tags differ is refused in one line, the packaged one left as it was."""
    build = _build(monkeypatch)
    corpus, model = shared_tiny_model
    run = model.parent
    monkeypatch.setattr(build, "MODELS", tmp_path / "models")
    monkeypatch.setitem(build.RECIPES, "tiny", dataclasses.replace(build.RECIPES["en-chunk"], weights_dtype="float16"))
    target = build.package("tiny", run, tmp_path)
    card = json.loads((target / "card.json").read_text(encoding="utf-8"))
    sentences = corpus.read_text(encoding="utf-8").strip().split("\n\n")
    assert card["weights_dtype"] == "float16" and set(_dtypes(target).values()) == {"F16"}
    check = card["weights_check"]
    assert (check["sentences"], check["tokens"], check["batch"], check["differ"]) == (
        len(sentences),
        sum(len(s.splitlines()) for s in sentences),
        64,
        0,
    )
    assert "0 tags differ" in (target / "card.md").read_text(encoding="utf-8")
    assert card["size_bytes"] == sum((target / n).stat().st_size for n in build.MODEL_FILES)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    from seqlab.tagging import storage

    real = storage.model_files

    def noisy(tagger, weights_dtype="float32", tensors=None):
        torch.manual_seed(0)
        with torch.no_grad():
            for p in tagger.net.parameters():
                p.add_(torch.randn_like(p))
        return real(tagger, weights_dtype, tensors)

    monkeypatch.setattr(storage, "model_files", noisy)
    monkeypatch.setattr(sys, "argv", ["build.py", "package", "tiny", str(run), "--data-root", str(tmp_path)])
    with pytest.raises(SystemExit) as exited:
        build.main()
    message = str(exited.value.code)
    assert message.startswith("error: ") and "test tags differ in half precision" in message and "\n" not in message
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["tiny"]  # no temp folder left
    monkeypatch.setattr(storage, "model_files", real)
    one = "decoder.crf.transitions"  # float16_tensors: that one tensor in float16, the others in float32
    recipe = dataclasses.replace(build.RECIPES["tiny"], float16_tensors=(one,))
    monkeypatch.setitem(build.RECIPES, "tiny", recipe)
    build.package("tiny", run, tmp_path)
    card = json.loads((target / "card.json").read_text(encoding="utf-8"))
    assert card["weights_dtype"] == "float16+float32" and card["float16_tensors"] == [one]
    assert card["weights_check"]["differ"] == 0
    assert {k for k, d in _dtypes(target).items() if d == "F16"} == {one}
    assert set(_dtypes(target).values()) == {"F16", "F32"}
    monkeypatch.setitem(build.RECIPES, "tiny", build.RECIPES["en-chunk"])  # float32: the run's files, as they are
    build.package("tiny", run, tmp_path)
    assert all((target / n).read_bytes() == (model / n).read_bytes() for n in build.MODEL_FILES)
    card = json.loads((target / "card.json").read_text(encoding="utf-8"))
    assert card["weights_dtype"] == "float32" and "weights_check" not in card


def test_each_recipe_validates_and_trains_on_the_one_thread_its_card_states(monkeypatch):
    """The command a card records (its config with the recipe's ``--set`` overrides) validates, and trains on one
    torch thread: the card's machine says so, and two builds share a 2-core machine."""
    from seqlab.config import load_config, parse_duration

    build = _build(monkeypatch)
    root = MODELS.parent
    for name, recipe in build.RECIPES.items():
        config = load_config(root / recipe.config, list(recipe.settings()))
        assert config.train.threads == 1, name
        if recipe.budget:
            assert recipe.train_args()[:2] == ["--budget", recipe.budget] and parse_duration(recipe.budget) > 0, name


@pytest.mark.parametrize("name", SHIPPED)
def test_the_recipe_builds_the_shipped_models_config_and_its_card_says_how(name, monkeypatch):
    """A named model's recipe still makes what is shipped: the config that its command (the config file as it is
    now, with the recipe's budget and overrides) validates into is the model's own config, and its card records
    that command. A config default changed later must be pinned in the recipe, or the card would name a command
    that trains another model."""
    from seqlab.config import config_from_dict, load_config

    recipe = _build(monkeypatch).RECIPES[name]
    stored = json.loads((MODELS / name / "config.json").read_text(encoding="utf-8"))["config"]
    budget = [f"train.budget={recipe.budget}"] if recipe.budget else []
    rebuilt = load_config(MODELS.parent / recipe.config, [*recipe.settings(), *budget])
    assert config_from_dict(stored, name) == rebuilt
    card = json.loads((MODELS / name / "card.json").read_text(encoding="utf-8"))
    assert card["recipe"]["command"] == recipe.command()
