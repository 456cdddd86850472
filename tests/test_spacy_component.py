"""The spaCy component (seqlab.integrations.spacy): found through the spacy_factories entry point on
spacy.blank("en") (no spaCy model download), sets doc.ents / doc.spans / token tags from a seqlab model with
confidences, aligned to spaCy's tokens, batched through nlp.pipe."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

spacy = pytest.importorskip("spacy", reason="spaCy is not installed (pip install 'seqlab[spacy]')")

TEXTS = [
    "He reckons the current account deficit will narrow to only 1.8 billion in September .",
    "Confidence in the pound is widely expected to take another sharp dive .",
    "  The  pound\nfell .  ",
]


@pytest.fixture(scope="module")
def ner_model(shared_tiny_model, tmp_path_factory) -> Path:
    """The shared tiny chunker, its task set to ner (what picks doc.ents)."""
    folder = tmp_path_factory.mktemp("spacy") / "ner"
    shutil.copytree(shared_tiny_model[1], folder)
    meta = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    meta["config"]["task"] = "ner"
    (folder / "config.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


def test_registered_by_entry_point():
    from importlib.metadata import entry_points

    from seqlab.integrations.spacy import make_component

    (point,) = [p for p in entry_points(group="spacy_factories") if p.name == "seqlab"]
    assert point.load() is make_component  # seqlab.integrations.spacy's, or an install's older path to it
    code = "import spacy; print(spacy.blank('en').has_factory('seqlab'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["True"]  # found without an import of seqlab


def test_entities_with_confidences(ner_model):
    from seqlab.tagger import Tagger

    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": str(ner_model)})
    doc = nlp(TEXTS[0])
    assert doc.ents
    tagger = Tagger.load(ner_model)
    (pred,) = tagger.predict([[t.text for t in doc]], confidence=True)
    assert [(e.start, e.end, e.label_) for e in doc.ents] == [(s.start, s.end, s.type) for s in pred.spans]
    assert [e._.seqlab_confidence for e in doc.ents] == [s.confidence for s in pred.spans]
    assert all(0 < e._.seqlab_confidence <= 1 for e in doc.ents)
    assert [t._.seqlab_confidence for t in doc] == pred.token_confidence


def test_chunks_tags_and_spacy_tokens(shared_tiny_model):
    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": str(shared_tiny_model[1])})  # task chunking: doc.spans
    doc = nlp(TEXTS[2])  # runs of spaces and a newline: spaCy's space tokens are left out
    assert not doc.ents and "seqlab" in doc.spans
    chunks = doc.spans["seqlab"]
    assert chunks and all(s._.seqlab_confidence is not None for s in chunks)
    assert all(not s.text[0].isspace() and not s.text[-1].isspace() for s in chunks)
    tagger_nlp = spacy.blank("en")
    tagger_nlp.add_pipe("seqlab", config={"model": str(shared_tiny_model[1]), "mode": "tags"})
    tagged = tagger_nlp(TEXTS[1])
    assert all(t.tag_ for t in tagged) and tagged[0].tag_.endswith("NP")


def test_pipe_batches_like_single_calls(ner_model):
    nlp = spacy.blank("en")
    component = nlp.add_pipe("seqlab", config={"model": str(ner_model)})
    calls = []
    predict = component.tagger.predict
    component.tagger.predict = lambda sentences, *a, **k: calls.append(len(sentences)) or predict(sentences, *a, **k)
    docs = list(nlp.pipe(TEXTS * 2, batch_size=2))  # documents per call of the model
    assert calls == [2, 2, 2]
    one = [[(e.start_char, e.end_char, e.label_) for e in nlp(t).ents] for t in TEXTS * 2]
    assert [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in docs] == one


def test_named_model_and_errors(ner_model, tmp_path, monkeypatch):
    from seqlab.errors import SeqlabError

    (tmp_path / "zoo").mkdir()
    shutil.copytree(ner_model, tmp_path / "zoo" / "tiny-ner")
    monkeypatch.setenv("SEQLAB_MODELS", str(tmp_path / "zoo"))
    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": "tiny-ner"})
    assert nlp(TEXTS[0]).ents
    with pytest.raises(SeqlabError, match="needs a model"):
        spacy.blank("en").add_pipe("seqlab")
    with pytest.raises(SeqlabError, match="known names: .*tiny-ner"):
        spacy.blank("en").add_pipe("seqlab", config={"model": "en-nerr"})
    nlp.to_disk(tmp_path / "pipeline")  # the component is its config: the model's name
    again = spacy.load(tmp_path / "pipeline")
    assert [e.text for e in again(TEXTS[0]).ents] == [e.text for e in nlp(TEXTS[0]).ents]


def test_character_models_get_characters_and_spans_widen_to_spacy_tokens(ner_model, tmp_path):
    """A character model (its tokenizer chars, as a Chinese model's) tags each character of spaCy's tokens; its
    spans are widened to spaCy's token boundaries."""
    folder = tmp_path / "chars"
    shutil.copytree(ner_model, folder)
    meta = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    meta["config"]["data"]["tokenizer"] = "chars"
    (folder / "config.json").write_text(json.dumps(meta), encoding="utf-8")
    nlp = spacy.blank("en")
    component = nlp.add_pipe("seqlab", config={"model": str(folder)})
    seen = []
    predict = component.tagger.predict
    component.tagger.predict = lambda sentences, *a, **k: seen.extend(sentences) or predict(sentences, *a, **k)
    doc = nlp("The pound fell sharply today .")
    assert seen[0].tokens == list("Thepoundfellsharplytoday.")
    for ent in doc.ents:  # whole spaCy tokens, in order, none overlapping
        assert ent.start_char == doc[ent.start].idx and ent.end_char == doc[ent.end - 1].idx + len(doc[ent.end - 1])


def test_pos_models_set_token_tags(tmp_path_factory):
    from seqlab.errors import SeqlabError
    from tests.conftest import tiny_config, train_tiny

    _, run, _ = train_tiny(
        tmp_path_factory,
        "pos",
        lambda p: tiny_config(
            p,
            task="pos",
            data={"train": str(p), "dev": str(p), "test": str(p), "label_column": 1, "scheme": "none"},
            train={**tiny_config(p).train.model_dump(), "max_epochs": 3},
        ),
    )
    nlp = spacy.blank("en")
    nlp.add_pipe("seqlab", config={"model": str(run / "model")})
    doc = nlp("The pound fell  sharply .")
    assert [t.tag_ for t in doc if not t.is_space] and all(t.tag_ for t in doc if t.text.strip())
    assert all(0 < t._.seqlab_confidence <= 1 for t in doc if t.text.strip())
    with pytest.raises(SeqlabError, match="use mode 'tags'"):
        spacy.blank("en").add_pipe("seqlab", config={"model": str(run / "model"), "mode": "ents"})
