"""Each named model shipped under models/ loads by its name and tags a sentence of its language; its card holds
what `seqlab models` shows, and its size stays small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seqlab import Tagger

MODELS = Path(__file__).resolve().parents[1] / "models"
SHIPPED = sorted(p.name for p in MODELS.iterdir() if (p / "card.json").is_file()) if MODELS.is_dir() else []
SENTENCES = {
    "en": "John Smith flew from New York to Berlin to meet the board of Siemens on Monday .",
    "zh": "张伟毕业于北京大学，现任华为技术有限公司高级工程师。",
}
EXPECTED = {"en": {"ner": "PER", "chunking": "NP", "pos": None}, "zh": {"ner": None}}


def test_the_named_models_are_shipped():
    assert {"en-ner", "en-chunk", "en-pos", "zh-ner-resume"} <= set(SHIPPED), SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_a_named_model_loads_by_name_and_tags_its_language(name):
    card = json.loads((MODELS / name / "card.json").read_text(encoding="utf-8"))
    assert card["name"] == name and card["scores"]["test"]["value"] > 50
    assert card["size_bytes"] < 30_000_000
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
