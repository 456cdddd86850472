"""The ``lac`` feature: Paddle tensor files read without Paddle, the frozen LAC network of the jieba package
against the analyses LAC is known to give, padding and batching, and a tagger with it end to end (overfit,
save -> load -> predict identical, no export)."""

from __future__ import annotations

import json
import pickle
import shutil
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.readers import read_bmes
from seqlab.data.sentence import Sentence
from seqlab.errors import SeqlabError
from seqlab.features.lac import DIMS, HIDDEN, WORD_DIM, LacConfig, LacWords, lac_folder, read_vocabulary, reversal
from seqlab.io.paddle import read_paddle_tensor
from seqlab.nn.context import Context
from tests.test_flat import make_corpus, raw_config

# --------------------------------------------------------------------------------------------
# Paddle tensor files
# --------------------------------------------------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def paddle_file(dims: list[int], data: np.ndarray, packed: bool = False, dtype: int = 5, lod: int = 0) -> bytes:
    if packed:
        body = b"".join(varint(d) for d in dims)
        desc = b"\x08" + varint(dtype) + b"\x12" + varint(len(body)) + body
    else:
        desc = b"\x08" + varint(dtype) + b"".join(b"\x10" + varint(d) for d in dims)
    levels = b"".join(struct.pack("<Q", 8) + struct.pack("<Q", 0) for _ in range(lod))
    head = struct.pack("<IQ", 0, lod) + levels + struct.pack("<Ii", 0, len(desc)) + desc
    return head + data.astype("<f4").tobytes()


@pytest.mark.parametrize("packed", [False, True])
def test_a_tensor_file_reads_back_its_values_and_shape(tmp_path, packed):
    values = np.arange(2 * 3 * 300, dtype=np.float32).reshape(2, 3, 300) / 7
    path = tmp_path / "w"
    path.write_bytes(paddle_file([2, 3, 300], values, packed=packed, lod=1))
    assert np.array_equal(read_paddle_tensor(path), values)


@pytest.mark.parametrize(
    "mangle, message",
    [
        (lambda b: b[:10], "truncated header"),
        (lambda b: b[:-4], "dims \\[2, 3\\] need 24 bytes of data, the file has 20"),
        (lambda b: struct.pack("<I", 7) + b[4:], "version 7"),
        (lambda b: b[:20] + b"\x08\x06" + b[22:], "data type 6"),
        (lambda b: b[:16] + struct.pack("<i", 1 << 20) + b[20:], "bad tensor header"),
        (lambda b: b[:20] + b"\x08\x05\x10\xff" + b[24:], "bad tensor description"),
    ],
)
def test_a_broken_tensor_file_is_one_line_naming_it(tmp_path, mangle, message):
    path = tmp_path / "w"
    path.write_bytes(mangle(paddle_file([2, 3], np.ones((2, 3)))))
    with pytest.raises(SeqlabError, match=message) as err:
        read_paddle_tensor(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


# --------------------------------------------------------------------------------------------
# The LAC network
# --------------------------------------------------------------------------------------------

TAGS = [line.split("\t")[1] for line in (lac_folder() / "tag.dic").read_text(encoding="utf-8").split("\n") if line]


@pytest.fixture(scope="module")
def emissions():
    featurizer = LacConfig(outputs=["emissions"]).build("lac")
    featurizer.fit([], [], seed=0)
    return featurizer, featurizer.module().eval()


def run(featurizer, module, sentences: list[Sentence]) -> torch.Tensor:
    width = max(len(s) for s in sentences) + 3  # padding past the longest too
    mask = torch.tensor([[t < len(s) for t in range(width)] for s in sentences])
    return module(featurizer.collate([featurizer.encode(s) for s in sentences], width), Context.of(mask))


def viterbi(scores: np.ndarray, crf: np.ndarray) -> list[int]:
    """LAC's CRF decoding, written out: ``crf`` rows are the start scores, the end scores, then [from, to]."""
    start, end, trans = crf[0], crf[1], crf[2:]
    best, back = start + scores[0], []
    for row in scores[1:]:
        total = best[:, None] + trans  # (from, to)
        back.append(total.argmax(0))
        best = total.max(0) + row
    path = [int((best + end).argmax())]
    for pointers in reversed(back):
        path.append(int(pointers[path[-1]]))
    return path[::-1]


def entities(text: str, tags: list[str]) -> list[tuple[str, str]]:
    """(type, text) of each PER / LOC / ORG / TIME run of B, I... tags."""
    out = []
    for k, tag in enumerate(tags):
        kind, _, part = tag.partition("-")
        if kind in ("PER", "LOC", "ORG", "TIME"):
            if part == "B" or not out or out[-1][2] != k - 1 or out[-1][0] != kind:
                out.append([kind, text[k], k])
            else:
                out[-1][1] += text[k]
                out[-1][2] = k
    return [(kind, words) for kind, words, _ in out]


def test_lac_finds_the_entities_it_is_known_to_find(emissions):
    """LAC's analyses of these sentences, decoded with its own CRF: the places, persons, organisations and times a
    reader finds. A wrong gate order or weight layout finds none of them (tried: each of the other GRU variants
    tags whole sentences as one entity)."""
    featurizer, module = emissions
    text = ["我爱北京天安门", "张三在清华大学读书，2019年毕业。", "中国人民银行行长易纲今天在上海表示"]
    scores = run(featurizer, module, [Sentence(list(t)) for t in text]).numpy()
    crf = read_paddle_tensor(lac_folder() / "model_baseline" / "crfw")  # (2 + tags, tags)
    found = [entities(t, [TAGS[k] for k in viterbi(row[: len(t)], crf)]) for row, t in zip(scores, text)]
    assert found == [
        [("LOC", "北京"), ("LOC", "天安门")],
        [("PER", "张三"), ("ORG", "清华大学"), ("TIME", "2019年")],
        [("ORG", "中国人民银行"), ("PER", "易纲"), ("TIME", "今天"), ("LOC", "上海")],
    ]


def test_reversal_mirrors_each_sentence_and_keeps_padding():
    lengths = torch.tensor([3, 5, 0])
    back = reversal(lengths, 5)
    assert back.tolist() == [[2, 1, 0, 3, 4], [4, 3, 2, 1, 0], [0, 1, 2, 3, 4]]
    assert torch.equal(back.gather(1, back), torch.arange(5).expand(3, 5))  # its own inverse


def test_outputs_do_not_depend_on_the_batch_or_its_padding():
    featurizer = LacConfig(outputs=["embeddings", "states", "emissions"]).build("lac")
    featurizer.fit([], [], seed=0)
    module = featurizer.module().eval()
    sentences = [
        Sentence(list("张三在清华大学读书")),
        Sentence(list("易纲在上海表示，中国人民银行今天开会。")),
        Sentence(["好"]),
    ]
    together = run(featurizer, module, sentences)
    assert together.shape[-1] == sum(DIMS.values()) == module.output_dim
    for k, s in enumerate(sentences):
        alone = run(featurizer, module, [s])
        torch.testing.assert_close(alone[0, : len(s)], together[k, : len(s)], rtol=0, atol=1e-5)
        assert not together[k, len(s) :].any()  # zero on padding


def test_training_memo_runs_each_sentence_once_and_changes_nothing(emissions, monkeypatch):
    featurizer, module = emissions
    sentences = [Sentence(list("张三在清华大学读书")), Sentence(list("易纲在上海表示")), Sentence(["好"])]
    plain = run(featurizer, module, sentences)
    seen = []
    compute = module.run
    monkeypatch.setattr(module, "run", lambda ids, lengths: seen.append(len(ids)) or compute(ids, lengths))
    module.train()
    try:
        first, again = run(featurizer, module, sentences), run(featurizer, module, sentences[1:])
    finally:
        module.eval()
    assert seen == [3] and len(module.memo) == 3  # the second pass found both of its sentences
    torch.testing.assert_close(first, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(again[:, :7], plain[1:, :7], rtol=0, atol=1e-5)


def test_characters_outside_lacs_vocabulary_get_its_oov_row(emissions):
    featurizer, _ = emissions
    ids = featurizer.encode(Sentence(["北", "🦜", "ab"]))
    oov = featurizer.itos.index("OOV")
    assert ids[0] != oov and ids[1] == oov and ids[2] == oov


def test_the_vocabulary_file_is_validated(tmp_path):
    path = tmp_path / "word.dic"
    path.write_text("0\t北\n2\tOOV\n", encoding="utf-8")
    assert read_vocabulary(path) == ["北", "<unused 1>", "OOV"]
    path.write_text("0\t北\nx\tOOV\n", encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"word.dic:2: expected 'id<TAB>character'"):
        read_vocabulary(path)
    path.write_text("0\t北\n1\t京\n", encoding="utf-8")
    with pytest.raises(SeqlabError, match="an 'OOV' entry"):
        read_vocabulary(path)


def test_config_errors_name_the_key(tmp_path):
    raw = raw_config(tmp_path / "x", tmp_path / "y")
    raw["model"]["embedder"]["features"]["lac"] = {"type": "lac", "outputs": ["states", "states"]}
    with pytest.raises(SeqlabError, match=r"model.embedder.features.lac.outputs"):
        config_from_dict(raw)
    raw["model"]["embedder"]["features"]["lac"] = {"type": "lac", "outputs": []}
    with pytest.raises(SeqlabError, match=r"model.embedder.features.lac.outputs"):
        config_from_dict(raw)


# --------------------------------------------------------------------------------------------
# A tagger with the feature
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lac_run(tmp_path_factory):
    from seqlab.training import train

    root = tmp_path_factory.mktemp("lac")
    corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
    make_corpus(corpus)
    lexicon.write_text("北京\n大学\n", encoding="utf-8")
    raw = raw_config(corpus, lexicon)
    raw["model"]["embedder"]["features"]["lac"] = {"type": "lac", "outputs": ["emissions"]}
    raw["train"]["max_epochs"] = raw["train"]["patience"] = 25
    result = train(config_from_dict(raw), root / "run", progress=False)
    return corpus, root / "run", result


def test_a_flat_tagger_with_lac_overfits_20_sentences(lac_run):
    assert lac_run[2].test["f1"] == 100.0


def test_save_load_predict_identical_and_lac_is_not_trained(lac_run, tmp_path):
    corpus, run_dir, _ = lac_run
    tagger = Tagger.load(run_dir / "model")
    fresh = LacConfig(outputs=["emissions"]).build("lac")
    fresh.fit([], [], seed=0)
    loaded = tagger.net.embedder.lac
    for name, value in fresh.module().named_buffers():  # the weights as jieba ships them, untouched
        assert torch.equal(loaded.get_buffer(name), value), name
    assert not any(name.startswith("embedder.lac.") for name in tagger.net.state_dict())  # not in the model file
    assert_reloads_identically(
        tagger, ["王小明毕业于清华大学，现任华为技术有限公司工程师。", "赵丽现任中国银行主任。"], corpus, tmp_path
    )


def assert_reloads_identically(tagger: Tagger, text: list[str], corpus: Path, tmp_path: Path) -> None:
    """save -> load -> predict gives the same tags, at batch 1 and batched."""
    before = [p.tags for p in tagger.predict(text)]
    tagger.save(tmp_path / "copy")
    again = Tagger.load(tmp_path / "copy")
    assert [p.tags for p in again.predict(text)] == before
    assert [p.tags for p in again.predict(text, batch_size=1)] == before
    sentences = read_bmes(corpus)
    assert again.predict_tags(sentences, batch_size=1) == again.predict_tags(sentences)


def test_a_model_with_lac_refuses_to_export_and_runs_eagerly_under_auto(lac_run, tmp_path):
    from seqlab.serving.export import export_torchscript

    tagger = Tagger.load(lac_run[1] / "model")
    with pytest.raises(SeqlabError, match="feature 'lac' runs a loop over time steps"):
        export_torchscript(lac_run[1] / "model", tmp_path / "model.pt")
    text = ["王小明毕业于清华大学，现任华为技术有限公司工程师。"]
    before = [p.tags for p in tagger.predict(text)]
    tagger.set_engine("auto")  # falls back to torch for every batch, with the same tags
    assert [p.tags for p in tagger.predict(text)] == before


def test_lac_folder_is_the_installed_jiebas():
    assert (lac_folder() / "model_baseline" / "word_emb").is_file()
    assert isinstance(lac_folder(), Path)


def test_a_model_trained_with_other_lac_files_is_refused_at_load(lac_run, tmp_path):
    def other_files(features: dict) -> None:
        assert len(features["lac"]["sha256"]) == 64
        features["lac"]["sha256"] = "0" * 64

    assert_refused(
        lac_run[1] / "model", other_files, r"vocab.json: features.lac: the installed jieba's LAC model", tmp_path
    )


def assert_refused(model: Path, edit, message: str, tmp_path: Path) -> None:
    """A copy of ``model`` whose vocab.json features ``edit`` changed fails to load with one line matching
    ``message``."""
    copy = tmp_path / "model"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(model, copy)
    vocab = json.loads((copy / "vocab.json").read_text(encoding="utf-8"))
    edit(vocab["features"])
    (copy / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(SeqlabError, match=message) as err:
        Tagger.load(copy)
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------------------------
# Lattice words read alone by LAC (the lattice option ``lac``)
# --------------------------------------------------------------------------------------------


def test_a_word_read_alone_is_lacs_reading_of_it_as_a_sentence(emissions):
    words = LacWords("lexicon.lac")
    words.read()
    whole = LacConfig(outputs=["states", "emissions"]).build("lac")
    whole.fit([], [], seed=0)
    module = whole.module().eval()
    names = ["中国人民银行", "北京", "今天", "北京", "好🦜"]
    rows = words.rows(names)
    assert rows.tolist() == [1, 2, 3, 2, 4]  # one row per distinct word, in the order met; 0 is padding
    vectors = words.vectors(torch.tensor([[0, *rows.tolist()]]))[0]  # (1 + words, WORD_DIM)
    assert vectors.shape == (6, WORD_DIM) and not vectors[0].any()
    for name, vector in zip(names, vectors[1:]):
        alone = run(whole, module, [Sentence(list(name))])[0, : len(name)]  # (chars, 313)
        expected = torch.cat([alone[-1, :HIDDEN], alone[0, HIDDEN : 2 * HIDDEN], alone[:, 2 * HIDDEN :].mean(0)])
        torch.testing.assert_close(vector, expected, rtol=0, atol=2e-3)  # float16 storage
    tags = [line.split("\t")[1] for line in (lac_folder() / "tag.dic").read_text(encoding="utf-8").split("\n") if line]
    top = {name: {tags[i] for i in v[2 * HIDDEN :].topk(3).indices.tolist()} for name, v in zip(names, vectors[1:])}
    assert "ORG-I" in top["中国人民银行"] and "LOC-I" in top["北京"] and "TIME-I" in top["今天"]
    many = [f"词{k}" for k in range(3000)]  # the table grows past its first size
    assert words.rows(many).tolist() == list(range(5, 3005))
    assert words.vectors(torch.tensor(words.rows(["北京"])))[0].equal(vectors[2])
    copy = pickle.loads(pickle.dumps(words))  # as Ray ships a tagger to its workers
    assert copy.rows(["北京", "新词"]).tolist() == [2, 3005]
    assert copy.vectors(torch.tensor([2]))[0].equal(vectors[2])


def train_flat_on_20_sentences(root: Path, **lattice) -> tuple[Path, Path, Any]:
    """A FLAT tagger trained to overfit 20 sentences, its lattice with the options ``lattice``: (corpus, run
    folder, training result)."""
    from seqlab.training import train

    corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
    make_corpus(corpus)
    lexicon.write_text("北京\n大学\n清华大学\n工程师\n", encoding="utf-8")
    raw = raw_config(corpus, lexicon)
    raw["model"]["embedder"]["features"]["lexicon"].update(lattice)
    raw["train"]["max_epochs"] = raw["train"]["patience"] = 25
    result = train(config_from_dict(raw), root / "run", progress=False)
    return corpus, root / "run", result


@pytest.fixture(scope="module")
def lac_words_run(tmp_path_factory):
    return train_flat_on_20_sentences(tmp_path_factory.mktemp("lac_words"), lac=True)


def assert_overfit_and_reloaded(run: tuple[Path, Path, Any], tmp_path: Path) -> Tagger:
    """The run of :func:`train_flat_on_20_sentences` tags its 20 sentences right, and its saved model tags new text
    the same after a reload; the model."""
    corpus, run_dir, result = run
    assert result.test["f1"] == 100.0
    tagger = Tagger.load(run_dir / "model")
    text = ["王小明毕业于清华大学，现任华为技术有限公司工程师。", "北京大学的工程师"]
    assert_reloads_identically(tagger, text, corpus, tmp_path)
    return tagger


def test_a_flat_tagger_with_lac_words_overfits_and_reloads_identically(lac_words_run, tmp_path):
    tagger = assert_overfit_and_reloaded(lac_words_run, tmp_path)
    assert tagger.net.embedder.lexicon.lac.weight.shape == (12, WORD_DIM)  # trained: LAC's reading -> the word's dim


def test_a_lac_words_model_without_its_lac_state_or_with_other_files_is_refused(lac_words_run, tmp_path):
    for value, message in [
        (None, r"vocab.json: features.lexicon.lac: expected \{'model': 'jieba/lac_small'"),
        ({"model": "jieba/lac_small", "sha256": "0" * 64}, "vocab.json: features.lexicon.lac: the installed jieba's"),
    ]:

        def replace(features: dict, value=value) -> None:
            assert len(features["lexicon"]["lac"]["sha256"]) == 64
            features["lexicon"]["lac"] = value

        assert_refused(lac_words_run[1] / "model", replace, message, tmp_path)
