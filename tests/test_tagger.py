"""End-to-end model behaviour: overfitting, save/load identity, batch-size and padding invariance."""

from __future__ import annotations

import json

import pytest
import torch

from seqlab import Tagger, train
from seqlab.data.readers import read_conll
from seqlab.data.sentence import Sentence
from tests.conftest import assert_same_on_two_threads, tiny_config, train_tiny


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    return train_tiny(tmp_path_factory, "tiny", tiny_config)


def test_bilstm_crf_overfits_20_sentences(trained):
    _, _, result = trained
    assert result.dev["f1"] > 99.0
    assert result.test["f1"] > 99.0


def test_save_load_predict_identical(trained, tmp_path):
    path, run, _ = trained
    tagger = Tagger.load(run / "model")
    sentences = read_conll(path, label_column=None)
    before = tagger.predict_tags(sentences)
    tagger.save(tmp_path / "copy")
    tagger.save(tmp_path / "copy.zip")
    for other in (Tagger.load(tmp_path / "copy"), Tagger.load(tmp_path / "copy.zip")):
        assert other.predict_tags(sentences) == before
        for a, b in zip(tagger.net.state_dict().values(), other.net.state_dict().values()):
            assert torch.equal(a, b)


def test_model_folder_holds_no_pickle(trained):
    _, run, _ = trained
    names = sorted(p.name for p in (run / "model").iterdir())
    assert names == ["config.json", "model.safetensors", "vocab.json"]
    meta = json.loads((run / "model" / "config.json").read_text())
    assert meta["config"]["model"]["decoder"]["type"] == "crf"


def test_predictions_do_not_depend_on_batch_size(trained):
    path, run, _ = trained
    tagger = Tagger.load(run / "model")
    sentences = read_conll(path, label_column=None)
    reference = tagger.predict_tags(sentences, batch_size=1)
    for bs in (2, 7, 64):
        assert tagger.predict_tags(sentences, batch_size=bs) == reference


def test_predictions_do_not_depend_on_padding_splits(trained):
    """Server-like calls mix very unequal lengths; cutting them into less padded batches changes nothing."""
    path, run, _ = trained
    tagger = Tagger.load(run / "model")
    sentences = read_conll(path, label_column=None)
    mixed = sentences + [Sentence(["Stocks", "rose", "."] * 30)]
    results = []
    for overhead in (None, 0, 64):
        tagger.pad_overhead = overhead
        results.append([p.tags for p in tagger.predict(mixed, batch_size=64, confidence=True)])
    assert results[0] == results[1] == results[2]


def test_features_padding_invariant(trained):
    """A sentence's features are the same alone and next to a much longer sentence with longer words."""
    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    from seqlab.data.batching import collate
    from seqlab.data.sentence import Sentence

    short = Sentence(["He", "sold", "it", "."])
    long = Sentence(("Extraordinarily " * 30 + "uncharacteristically long sentence .").split())
    enc = tagger.encode([short, long], with_tags=False)
    tagger.net.eval()
    with torch.no_grad():
        alone = tagger.net(collate([enc[0]], [0], tagger.featurizers)).features[0]
        together = tagger.net(collate(enc, [0, 1], tagger.featurizers)).features[0, : len(short)]
    assert torch.allclose(alone, together, atol=1e-5)


def test_predict_api_returns_tokens_tags_and_spans(trained):
    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    pred = tagger.predict(["Confidence in the pound is widely expected to take another sharp dive ."])[0]
    assert pred.tokens[0] == "Confidence" and len(pred.tags) == len(pred.tokens)
    assert all(t == "O" or t[:2] in ("B-", "I-") for t in pred.tags)  # written back in the input's BIO
    assert pred.spans and all(0 <= s.start < s.end <= len(pred.tokens) for s in pred.spans)
    nbest = tagger.predict(["He reckons the deficit will narrow ."], nbest=3)[0].nbest
    assert len(nbest) == 3 and nbest[0].score >= nbest[1].score >= nbest[2].score
    assert nbest[0].tags == tagger.predict(["He reckons the deficit will narrow ."])[0].tags


def test_very_long_sentence(trained):
    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    tokens = ("the pound fell sharply against the dollar , " * 130).split()
    assert len(tokens) >= 1000
    pred = tagger.predict([tokens])[0]
    assert len(pred.tags) == len(tokens)


def test_softmax_decoder_overfits(tiny_corpus, tmp_path):
    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    raw["model"]["decoder"] = {"type": "softmax"}
    from seqlab.config import config_from_dict

    config = config_from_dict(raw)
    result = train(config, tmp_path / "run", progress=False)
    assert result.dev["f1"] > 97.0


def test_char_lstm_and_pos_accuracy(tiny_corpus, tmp_path):
    config = tiny_config(tiny_corpus, task="pos")
    raw = config.model_dump(mode="json")
    raw["data"].update(label_column=1, scheme="none", train_scheme="same")
    raw["model"]["embedder"]["features"]["char"]["encoder"] = "lstm"
    from seqlab.config import config_from_dict

    result = train(config_from_dict(raw), tmp_path / "run", progress=False)
    assert result.dev["accuracy"] > 98.0
    # plain labels report token accuracy only: no chunk counts, no F1 key
    assert "f1" not in result.dev and "f1" not in json.loads((tmp_path / "run" / "results.json").read_text())["test"]
    from seqlab.evaluation.metrics import format_report
    from seqlab.training import evaluate

    report = format_report(evaluate(tmp_path / "run" / "model", tiny_corpus))
    assert report.startswith("processed ") and "accuracy:" in report and "FB1" not in report and "phrases" not in report


def test_frozen_word_embeddings_stay_fixed(tiny_corpus, tmp_path):
    from seqlab.config import config_from_dict

    raw = tiny_config(tiny_corpus).model_dump(mode="json")
    raw["model"]["embedder"]["features"]["word"]["freeze"] = True
    raw["train"]["max_epochs"] = 2
    config = config_from_dict(raw)
    from seqlab.data.readers import read_conll as rc
    from seqlab.training import seed_everything

    seed_everything(config.train.seed)
    before = Tagger.build(config, rc(tiny_corpus, label_column=2), "BIO").net.embedder.word.embed.weight.clone()
    train(config, tmp_path / "run", progress=False)
    after = Tagger.load(tmp_path / "run" / "model").net.embedder.word.embed.weight
    assert torch.equal(before, after)


def test_predict_with_nbest_and_explain_runs_the_network_once(trained, monkeypatch):
    from seqlab.tagging.network import TaggerNet

    _, run, _ = trained
    tagger = Tagger.load(run / "model")
    calls = {"forward": 0, "encode": 0}
    forward = TaggerNet.forward

    def counting_forward(self, *args, **kwargs):
        calls["forward"] += 1
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(TaggerNet, "forward", counting_forward)
    word = tagger.featurizers["word"]
    encode, collate_sentences, collate_types = word.encode, word.collate_sentences, word.collate_types

    def counting_encode(sentence):
        calls["encode"] += 1
        return encode(sentence)

    def counting_collate(sentences, seq_len):  # a batch encoded at once
        calls["encode"] += len(sentences)
        return collate_sentences(sentences, seq_len)

    def counting_types(typed, seq_len):  # a batch collated from its tokens' type ids
        calls["encode"] += len(typed.sentences)
        return collate_types(typed, seq_len)

    monkeypatch.setattr(word, "encode", counting_encode)
    monkeypatch.setattr(word, "collate_sentences", counting_collate)
    monkeypatch.setattr(word, "collate_types", counting_types)
    pred = tagger.predict(["He reckons the deficit will narrow .", "Yes ."], nbest=2, explain=True)
    assert calls == {"forward": 1, "encode": 2}  # one batch, one pass; each sentence encoded once
    assert pred[0].nbest[0].tags == pred[0].tags and pred[0].explanation == []  # no attention layer
    calls.update(forward=0, encode=0)
    from seqlab.data.readers import read_conll as rc

    sentences = rc(run.parent / "tiny.txt", label_column=2)
    tagger.pad_overhead = None  # one batch of them all, not cut where padding is large
    tagger.evaluate(sentences, batch_size=1000)
    assert calls == {"forward": 1, "encode": len(sentences)}


def test_small_cpu_batches_run_on_one_thread_and_the_setting_is_restored():
    import torch

    from seqlab.runtime.devices import SMALL_BATCH, threads_for

    before = torch.get_num_threads()
    cpu = torch.device("cpu")
    try:
        torch.set_num_threads(2)
        with threads_for(SMALL_BATCH, cpu):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with threads_for(SMALL_BATCH + 1, cpu):
            assert torch.get_num_threads() == 2
        with pytest.raises(ZeroDivisionError), threads_for(1, cpu):
            1 / 0  # noqa: B018
        assert torch.get_num_threads() == 2  # restored on an error too
    finally:
        torch.set_num_threads(before)


def test_batches_side_by_side_on_two_threads_predict_what_one_thread_does(trained, monkeypatch):
    """On two threads, batches of more than SMALL_BATCH sentences run two at a time (one intra-op thread each):
    tags, n-best lists and confidences are those of the same batches one after another on one thread."""
    import threading

    from seqlab.runtime.devices import SMALL_BATCH

    path, run, _ = trained
    tagger = Tagger.load(run / "model")
    sentences = read_conll(path, label_column=None)
    from seqlab.tagging import inference

    ran_on = []
    tag_batch = inference.tag_batch

    def spy(tagger, batch, *args):
        ran_on.append((threading.current_thread().name, len(batch.index), torch.get_num_threads()))
        return tag_batch(tagger, batch, *args)

    monkeypatch.setattr(inference, "tag_batch", spy)
    together = assert_same_on_two_threads(tagger, sentences, nbest=2, confidence=True)  # asserts the count restored
    alone, side_by_side = ran_on[:5], ran_on[5:]  # the helper tags on one thread first, then on two
    assert {name for name, _, _ in alone} == {threading.current_thread().name}
    assert len(side_by_side) == 5 and all(rows > SMALL_BATCH and threads == 1 for _, rows, threads in side_by_side)
    assert all(name.startswith("seqlab-batch") for name, _, _ in side_by_side)
    assert all(p.token_confidence is not None and p.nbest for p in together)
