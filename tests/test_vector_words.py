"""Words the vectors know are never UNK (seqlab.features.words, seqlab.features.vectors.VectorIndex): a loaded model
built on pre-trained vectors gives a word outside its vocabulary that word's vector, for frozen and fine-tuned tables;
words in the vocabulary keep their predictions exactly."""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from seqlab.data.sentence import Sentence
from seqlab.features.vectors import VectorIndex, vector_index
from tests.conftest import SAMPLE, first_sentences, tiny_config

#: not one of these is in the 20 training sentences; GloVe 6B knows all but the last
NEW = ["Microsoft", "acquired", "Nintendo", "yesterday", "near", "Tokyo", "zzqxwv", "."]


def glove_config(path: Path, freeze: bool, pretrained: str = "glove-6b-50d", dim: int = 50, epochs: int = 3, **word):
    base = tiny_config(path)
    model = base.model.model_dump()
    model["embedder"]["features"]["word"] = {
        "type": "words",
        "dim": dim,
        "pretrained": pretrained,
        "freeze": freeze,
        **word,
    }
    return tiny_config(path, model=model, train={**base.train.model_dump(), "max_epochs": epochs})


@pytest.fixture(scope="module", params=[False, True], ids=["fine-tuned", "frozen"])
def glove_model(request, tmp_path_factory) -> tuple[Path, Path]:
    """(corpus, model folder) of a tiny chunker on GloVe 6B 50d whose vocabulary is the 20 training sentences'
    words (dev and test are the training file: no other word enters)."""
    from seqlab.training import train

    root = tmp_path_factory.mktemp("glove")
    path = root / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    train(glove_config(path, request.param), root / "run", progress=False)
    return path, root / "run" / "model"


def closed(tagger):
    """The tagger's words feature as before: unknown words UNK."""
    tagger.featurizers["word"].open_vocabulary = False
    tagger.token_types.__init__(tagger.token_types.capacity)
    tagger.featurizers["word"].set_vocab(tagger.featurizers["word"].vocab)
    return tagger


def test_unknown_words_get_their_vectors(glove_model):
    from seqlab.tagger import Tagger

    _, model = glove_model
    tagger = Tagger.load(model)
    feature = tagger.featurizers["word"]
    assert feature.vectors == "glove-6b-50d" and feature.open_vocabulary
    vocab = feature.vocab
    assert not any(w.lower() in vocab for w in NEW[:-2])  # the test words were not added when it was built
    ids = feature.encode(Sentence(NEW))
    unk = vocab.unk_index
    assert all(i >= len(vocab) for i in ids[:6]) and ids[6] == unk and ids[7] == vocab.index(".")
    glove = vector_index("glove-6b-50d").lookup([w.lower() for w in NEW[:6]])
    module = tagger.net.embedder.word
    rows = module({"ids": torch.from_numpy(ids)[None]}, None)[0]  # (tokens, 50)
    for k, word in enumerate(NEW[:6]):
        assert torch.equal(rows[k], torch.from_numpy(glove[word.lower()]))  # the pre-trained vector, un-tuned
    assert torch.equal(rows[6], module.embed.weight[unk])
    # the predictions use them: the network's features for the sentence differ from those of the closed model
    other = closed(Tagger.load(model))
    with torch.no_grad():
        features_open = tagger.net.eval().encode(_batch(tagger, [Sentence(NEW)]))[0]
        features_closed = other.net.eval().encode(_batch(other, [Sentence(NEW)]))[0]
    assert not torch.allclose(features_open, features_closed)
    assert tagger.predict([NEW])[0].tokens == NEW


def _batch(tagger, sentences):
    from seqlab.data.batching import collate

    encoded = tagger.encode(sentences)
    return collate(encoded, list(range(len(encoded))), tagger.featurizers)


def test_known_words_predict_exactly_as_before(glove_model):
    from seqlab.data.readers import read_conll
    from seqlab.tagger import Tagger

    corpus, model = glove_model
    known = read_conll(corpus, label_column=None)
    every = known + [Sentence(NEW)]  # the new words' sentence in a batch with known ones
    before = closed(Tagger.load(model)).predict(every, batch_size=7, confidence=True)
    tagger = Tagger.load(model)
    tagger.predict([NEW, ["Nintendo", "Sony", "and", "Sega"]])  # extra rows added first
    after = tagger.predict(every, batch_size=7, confidence=True)
    assert [p.to_dict() for p in after[:-1]] == [p.to_dict() for p in before[:-1]]
    assert tagger.predict(known, confidence=True) == closed(Tagger.load(model)).predict(known, confidence=True)


def test_a_vector_file_and_its_recorded_path(tmp_path, monkeypatch, caplog):
    """A text vector file named by a relative path: the model records its absolute path; only the rows of the
    words met are read; a file that is gone is a warning, and its words are UNK as before."""
    from seqlab.tagger import Tagger
    from seqlab.training import train

    words = sorted({w.lower() for line in first_sentences(SAMPLE, 20).splitlines() if line for w in line.split()[:1]})
    rng = np.random.default_rng(0)
    lines = [f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=8)) for w in words + ["tokyo", "nintendo"]]
    (tmp_path / "vec").mkdir()
    (tmp_path / "vec" / "small.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 20), encoding="utf-8")
    monkeypatch.chdir(tmp_path / "vec")
    train(glove_config(path, False, pretrained="small.txt", dim=8, epochs=1), tmp_path / "run", progress=False)
    monkeypatch.chdir(tmp_path)
    tagger = Tagger.load(tmp_path / "run" / "model")
    feature = tagger.featurizers["word"]
    assert feature.vectors == str(tmp_path / "vec" / "small.txt")
    ids = feature.encode(Sentence(["Tokyo", "Nintendo", "Kyoto"]))
    assert ids[0] >= len(feature.vocab) and ids[1] == ids[0] + 1 and ids[2] == feature.vocab.unk_index
    row = tagger.net.embedder.word({"ids": torch.tensor([[ids[0]]])}, None)[0, 0]
    assert np.allclose(row.detach().numpy(), [float(x) for x in lines[-2].split()[1:]])
    shutil.move(tmp_path / "vec", tmp_path / "gone")
    caplog.set_level(logging.WARNING, "seqlab")
    tagger = Tagger.load(tmp_path / "run" / "model")
    assert list(tagger.featurizers["word"].encode(Sentence(["Tokyo"]))) == [tagger.featurizers["word"].vocab.unk_index]
    assert "no such file any more" in caplog.text


def test_vector_index_reads_only_wanted_rows(tmp_path):
    import gzip

    (tmp_path / "v.txt").write_text("3 2\ncat 1 2\ndog 3 4\nbird 5 6\n", encoding="utf-8")
    with gzip.open(tmp_path / "v.txt.gz", "wt", encoding="utf-8") as f:
        f.write("cat 1 2\ndog 3 4\nbird 5 6\n")
    for name in ("v.txt", "v.txt.gz"):
        index = VectorIndex(str(tmp_path / name))
        found = index.lookup(["bird", "cat", "fish"])
        assert index.dim == 2 and set(found) == {"bird", "cat"} and list(found["bird"]) == [5, 6]


def test_extra_rows_are_bounded(glove_model, monkeypatch, caplog):
    from seqlab.tagger import Tagger

    monkeypatch.setattr("seqlab.features.words.MAX_EXTRA_BYTES", 2 * 4 * 50)  # two rows
    tagger = Tagger.load(glove_model[1])
    feature = tagger.featurizers["word"]
    caplog.set_level(logging.WARNING, "seqlab")
    ids = feature.encode(Sentence(["Microsoft", "Nintendo", "Tokyo", "Kyoto"]))
    assert list(ids[2:]) == [feature.vocab.unk_index] * 2 and ids[1] == ids[0] + 1
    assert "the most kept" in caplog.text


def test_training_adds_no_rows(tmp_path):
    from seqlab.data.readers import read_conll
    from seqlab.tagger import Tagger

    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 5), encoding="utf-8")
    sentences = read_conll(path, label_column=2)
    tagger = Tagger.build(glove_config(path, False), sentences, "BIO")
    feature = tagger.featurizers["word"]
    assert not feature.open_vocabulary
    assert feature.encode(Sentence(["Nintendo"]))[0] == feature.vocab.unk_index


@pytest.mark.skipif(importlib.util.find_spec("onnxruntime") is None, reason="onnxruntime is not installed")
def test_onnxruntime_runs_batches_with_new_words_eagerly(glove_model):
    from seqlab.tagger import Tagger

    tagger = Tagger.load(glove_model[1])
    eager = tagger.predict([NEW, ["The", "pound", "fell", "."]], batch_size=1, confidence=True)
    fast = Tagger.load(glove_model[1], engine="onnxruntime")
    got = fast.predict([NEW, ["The", "pound", "fell", "."]], batch_size=1, confidence=True)
    assert [p.tags for p in got] == [p.tags for p in eager]
    assert all(abs(a - b) < 1e-4 for p, q in zip(got, eager) for a, b in zip(p.token_confidence, q.token_confidence))


def test_dev_test_words_kept_out_of_the_vocabulary(tmp_path):
    """add_dev_test_words: false builds the vocabulary from the training words alone; a loaded model still gives
    a dev/test word its pre-trained vector (the row the default build would have put in a frozen table)."""
    from seqlab.data.readers import read_conll
    from seqlab.tagger import Tagger

    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 5), encoding="utf-8")
    train = read_conll(path, label_column=2)
    words = [w.lower() for w in NEW[:6]]
    glove = vector_index("glove-6b-50d").lookup(words)
    for add in (True, False):
        tagger = Tagger.build(glove_config(path, True, add_dev_test_words=add), train, "BIO", other=[Sentence(NEW)])
        vocab = tagger.featurizers["word"].vocab
        assert all((w in vocab) is add for w in words) and "zzqxwv" not in vocab
        tagger.save(tmp_path / f"model-{add}")
        loaded = Tagger.load(tmp_path / f"model-{add}")
        feature = loaded.featurizers["word"]
        assert len(feature.vocab) == len(vocab)
        ids = feature.encode(Sentence(NEW))
        assert all((i >= len(vocab)) is not add for i in ids[:6]) and ids[6] == vocab.unk_index
        rows = loaded.net.embedder.word({"ids": torch.from_numpy(ids)[None]}, None)[0]  # (tokens, 50)
        for k, word in enumerate(words):
            assert torch.equal(rows[k], torch.from_numpy(glove[word]))


def test_add_dev_test_words_validates(tmp_path):
    from seqlab.config import load_config
    from seqlab.data.readers import read_conll
    from seqlab.errors import SeqlabError
    from seqlab.features.words import WordsConfig

    config = Path(__file__).parents[1] / "configs" / "ner-conll2003-bilstm-crf.yaml"
    key = "model.embedder.features.word.add_dev_test_words"
    assert load_config(config).model.embedder.features["word"].add_dev_test_words is True  # the default: as before
    assert load_config(config, [f"{key}=false"]).model.embedder.features["word"].add_dev_test_words is False
    with pytest.raises(SeqlabError, match="add_dev_test_words"):
        load_config(config, [f"{key}=maybe"])
    # without pre-trained vectors no dev/test word enters the vocabulary either way
    path = tmp_path / "tiny.txt"
    path.write_text(first_sentences(SAMPLE, 5), encoding="utf-8")
    train = read_conll(path, label_column=2)
    vocabs = []
    for add in (True, False):
        feature = WordsConfig(dim=4, pretrained=None, add_dev_test_words=add).build("word")
        feature.fit(train, [Sentence(NEW)], 0)
        vocabs.append(feature.vocab.itos)
    assert vocabs[0] == vocabs[1] and "tokyo" not in vocabs[1]
