"""FLAT (paper 002): lexicon matching, the flat lattice, relative span positions, masks, the memory-saving
R against the naive formula, and the tagger end to end (overfit, save -> load -> predict from raw text)."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from seqlab import Tagger
from seqlab.config import config_from_dict
from seqlab.data.readers import read_bmes
from seqlab.data.sentence import Sentence
from seqlab.data.splitting import cut_points, split_long
from seqlab.encoders import flat as flat_module
from seqlab.encoders.flat import (
    KINDS,
    FlatConfig,
    RelativeSpanEncoding,
    lattice_mask,
    sinusoid,
    span_distances,
)
from seqlab.errors import SeqlabError
from seqlab.features.bigrams import BigramsConfig, bigrams
from seqlab.features.lattice import LatticeConfig, frequency_bin
from seqlab.features.lexicon import Lexicon, WordEntry, jieba_dict_path, read_word_entries, read_word_file
from seqlab.nn.context import Context
from tests.conftest import assert_same_on_two_threads
from tests.forkserver import seqlab_command

FIGURE1 = list("重庆人和药店")  # the paper's Figure 1: Chongqing Renhe Pharmacy
FIGURE1_WORDS = ["重庆", "重庆人", "人和药店", "药店"]


# --------------------------------------------------------------------------------------------
# Lexicon and lattice
# --------------------------------------------------------------------------------------------


def test_lattice_of_figure_1_with_overlapping_words():
    matches = Lexicon(FIGURE1_WORDS + ["药", "重庆大学"]).match(FIGURE1)  # one-char and unmatched words
    assert [(m.head, m.tail, m.word) for m in matches] == [
        (0, 1, "重庆"),
        (0, 2, "重庆人"),
        (2, 5, "人和药店"),
        (4, 5, "药店"),
    ]


def test_trie_matching_equals_a_brute_force_scan():
    rng = random.Random(0)
    alphabet = "甲乙丙丁戊"
    words = {"".join(rng.choice(alphabet) for _ in range(rng.randint(2, 5))) for _ in range(60)}
    lexicon = Lexicon(words)
    for _ in range(50):
        tokens = [rng.choice(alphabet) for _ in range(rng.randint(0, 25))]
        brute = [
            (i, j) for i in range(len(tokens)) for j in range(i + 1, len(tokens)) if "".join(tokens[i : j + 1]) in words
        ]
        assert [(m.head, m.tail) for m in lexicon.match(tokens)] == brute


def test_multi_character_tokens_match_on_token_boundaries_only():
    lexicon = Lexicon(["abcd", "bc", "abc"])
    assert [(m.head, m.tail) for m in lexicon.match(["ab", "cd"])] == [(0, 1)]  # abcd; never "bc" or "abc"


def test_word_list_options_and_errors(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("北京大学 100 nt\n大学 3\n北京\n研究生院 7\n学\n", encoding="utf-8")
    assert read_word_file(words, min_freq=5) == ["北京大学", "北京", "研究生院", "学"]  # no frequency: kept
    lexicon = Lexicon.load(str(words), max_length=3)
    assert lexicon.words == ["北京", "大学"]
    assert Lexicon.load(str(words)).tag("北京大学") == "nt" and Lexicon.load(str(words)).frequency("大学") == 3
    bare = Lexicon.load(str(words), details=False)  # the words alone, as a lattice without word classes keeps them
    assert bare.tag("北京大学") is None and bare.frequency("大学") is None and "北京大学" in bare
    extra = tmp_path / "mine.txt"
    extra.write_text("张三丰\n", encoding="utf-8")
    assert "张三丰" in Lexicon.load(str(words), extra=str(extra))
    vectors = tmp_path / "vec.txt"
    vectors.write_text("2 3\n北京 0.1 0.2 0.3\n上海 1 2 3\n", encoding="utf-8")
    assert Lexicon.load(str(vectors), fmt="vectors").words == ["上海", "北京"]
    bad = tmp_path / "bad.txt"
    bad.write_text("北京 x\n", encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"bad.txt:1: expected an integer frequency"):
        read_word_file(bad, min_freq=2)
    with pytest.raises(SeqlabError, match="no such lexicon file"):
        Lexicon.load(str(tmp_path / "missing.txt"))


def test_jieba_dictionary_is_the_default_lexicon():
    assert jieba_dict_path().name == "dict.txt"
    lexicon = Lexicon.load("jieba")
    assert len(lexicon) > 300_000 and "北京大学" in lexicon and min(map(len, lexicon.words)) == 2
    assert [m.word for m in lexicon.match(list("北京大学"))][:2] == ["北京", "北京大学"]


def test_bigrams_pair_each_token_with_the_next():
    assert bigrams(list("北京大")) == ["北京", "京大", "大</s>"]
    f = BigramsConfig(dim=4).build("bigram")
    f.fit([Sentence(list("北京大"))], [], 0)
    assert f.encode(Sentence(list("北京"))).tolist() == [f.vocab.index("北京"), 1]  # "京</s>" unseen: <unk>


# --------------------------------------------------------------------------------------------
# Relative span positions and masks
# --------------------------------------------------------------------------------------------


def figure1_spans():
    """Heads and tails of the flat lattice of Figure 1: 6 characters then the 4 words."""
    heads = torch.tensor([[0, 1, 2, 3, 4, 5, 0, 0, 2, 4]])
    tails = torch.tensor([[0, 1, 2, 3, 4, 5, 1, 2, 5, 5]])
    return heads, tails


def test_four_distances_against_hand_computed_values():
    heads, tails = figure1_spans()
    d = {k: v[0] for k, v in span_distances(heads, tails).items()}
    # 药店 (span 9: head 4, tail 5) against 人和药店 (span 8: head 2, tail 5)
    assert (d["hh"][9, 8], d["ht"][9, 8], d["th"][9, 8], d["tt"][9, 8]) == (2, -1, 3, 0)
    # the character 和 (span 3) against 重庆人 (span 7: head 0, tail 2)
    assert (d["hh"][3, 7], d["ht"][3, 7], d["th"][3, 7], d["tt"][3, 7]) == (3, 1, 3, 1)
    # the word block of d_hh and d_tt, by hand: heads 0 0 2 4, tails 1 2 5 5
    assert d["hh"][6:, 6:].tolist() == [[0, 0, -2, -4], [0, 0, -2, -4], [2, 2, 0, -2], [4, 4, 2, 0]]
    assert d["tt"][6:, 6:].tolist() == [[0, -1, -4, -4], [1, 0, -3, -3], [4, 3, 0, 0], [4, 3, 0, 0]]
    assert d["ht"][6:, 6:].tolist() == [[-1, -2, -5, -5], [-1, -2, -5, -5], [1, 0, -3, -3], [3, 2, -1, -1]]
    assert torch.equal(d["th"], -d["ht"].T)  # tail_i - head_j = -(head_j - tail_i)
    chars = torch.arange(6)
    for k in d:  # between characters every distance is i - j
        assert torch.equal(d[k][:6, :6], chars[:, None] - chars[None, :])


def test_self_matched_word_mask_msm():
    heads, tails = figure1_spans()
    keys = torch.ones(1, 10, dtype=torch.bool)
    allowed = lattice_mask(heads, tails, keys, 6, self_matched=False, max_distance=None)[0]
    #               重庆 重庆人 人和药店 药店  (columns), per character (rows): False = a self-matched word
    expected = [
        [False, False, True, True],  # 重
        [False, False, True, True],  # 庆
        [True, False, False, True],  # 人
        [True, True, False, True],  # 和
        [True, True, False, False],  # 药
        [True, True, False, False],
    ]  # 店
    assert allowed[:6, 6:].tolist() == expected
    assert allowed[:6, :6].all() and allowed[6:].all()  # characters among themselves and word rows: untouched
    assert lattice_mask(heads, tails, keys, 6, True, None).all()


def test_long_distance_mask_mld():
    heads, tails = figure1_spans()
    keys = torch.ones(1, 10, dtype=torch.bool)
    allowed = lattice_mask(heads, tails, keys, 6, self_matched=True, max_distance=1)[0]
    chars = torch.arange(6)
    assert torch.equal(allowed[:6, :6], (chars[:, None] - chars[None, :]).abs() <= 1)
    # 重庆 (0-1) and 药店 (4-5) are 3 apart; 重庆人 (0-2) and 人和药店 (2-5) overlap
    assert not allowed[6, 9] and allowed[7, 8] and allowed[3, 8] and not allowed[0, 9]


def test_sinusoid_matches_equations_9_and_10():
    p = sinusoid(torch.tensor([-3, 0, 7]), 6)
    for row, d in enumerate([-3, 0, 7]):
        for k in range(3):
            assert p[row, 2 * k] == pytest.approx(np.sin(d / 10000 ** (2 * k / 6)), abs=1e-6)
            assert p[row, 2 * k + 1] == pytest.approx(np.cos(d / 10000 ** (2 * k / 6)), abs=1e-6)


@pytest.mark.parametrize("kinds", [("hh", "th", "ht", "tt"), ("hh",)])
@pytest.mark.parametrize("whole", [False, True])
@pytest.mark.parametrize("chars", ["products", "blocks"])
@pytest.mark.parametrize("by_lengths", [True, False])
def test_memory_saving_r_equals_the_naive_formula(kinds, whole, chars, by_lengths, monkeypatch):
    """Every path of the memory-saving R: the pairs with a character through products of the queries with the
    table of sums (in blocks of rows, or through R when that table is too large) or through blocks like the
    other pairs, R in one piece or in blocks of a few query rows (recomputed in the backward pass), each
    block's R by one lookup in the table of sums per span lengths or by four lookups."""
    torch.manual_seed(0)
    if not whole:
        monkeypatch.setattr(flat_module, "BLOCK_ELEMENTS", 500)  # many blocks of a few query rows
        monkeypatch.setattr(flat_module, "WHOLE_ELEMENTS", 0)
    if not by_lengths:
        monkeypatch.setattr(flat_module, "LENGTH_TABLE_ELEMENTS", 0)
    d, b, n, w = 8, 2, 7, 5
    heads = torch.cat([torch.arange(n).expand(b, n), torch.randint(0, n - 1, (b, w))], 1)
    tails = torch.cat([torch.arange(n).expand(b, n), (heads[:, n:] + torch.randint(1, 4, (b, w))).clamp(max=n - 1)], 1)
    rel = RelativeSpanEncoding(d, kinds, naive=False)
    qv, wk = torch.randn(b, 3, n + w, 4, requires_grad=True), torch.randn(3, 4, d, requires_grad=True)
    blocked = rel.scores(qv, wk, heads, tails, n if chars == "products" else 0)
    grads = torch.autograd.grad(blocked.pow(2).sum(), [qv, wk, *rel.parameters()])
    rel.naive = True
    naive = rel.scores(qv, wk, heads, tails)
    # the oracle spelled out: R_ij = ReLU(W_r [p_hh; p_th; p_ht; p_tt]) for each pair, then qr . R
    dist = span_distances(heads, tails)
    p = torch.cat([sinusoid(dist[k], d) for k in kinds], -1)
    r = torch.relu(p @ rel.w_r.weight.T + rel.w_r.bias)  # (b, L, L, d)
    qr = torch.einsum("bhie,hed->bhid", qv, wk)  # the per-head queries in R's space
    oracle = (qr[:, :, :, None, :] * r[:, None]).sum(-1)
    assert torch.allclose(naive, oracle, atol=1e-5)
    assert torch.allclose(blocked, oracle, atol=1e-5)
    naive_grads = torch.autograd.grad(naive.pow(2).sum(), [qv, wk, *rel.parameters()])
    for g1, g2 in zip(grads, naive_grads):
        assert torch.allclose(g1, g2, atol=1e-4)


def test_r_by_span_lengths_has_the_bits_of_the_four_lookups():
    """R from the table of sums per (a, b, d_hh) equals, bit for bit, R summed from the four lookups, for
    spans of lengths 1-5 (padding spans included: head = tail = 0)."""
    torch.manual_seed(5)
    d, b, n, w = 16, 3, 12, 9
    heads = torch.cat([torch.arange(n).expand(b, n), torch.randint(0, n - 1, (b, w))], 1)
    tails = torch.cat([torch.arange(n).expand(b, n), (heads[:, n:] + torch.randint(0, 5, (b, w))).clamp(max=n - 1)], 1)
    heads[0, -2:] = tails[0, -2:] = 0  # padding words
    for kinds in (KINDS, ("hh",)):
        rel = RelativeSpanEncoding(d, kinds, naive=False)
        table, offset = rel.tables(n - 1, heads.device)
        for rows, cols in [(slice(None), slice(None)), (slice(n, None), slice(None)), (slice(2, 5), slice(n, None))]:
            fast = rel._by_lengths(table, heads, tails, rows, cols, offset)
            dist = span_distances(heads, tails, rows, cols)
            slow = sum(
                (torch.nn.functional.embedding(dist[k] + offset, table[i]) for i, k in enumerate(kinds)),
                torch.zeros(()),
            )
            assert torch.equal(fast, torch.relu(slow))


def test_pairs_with_a_character_take_the_products_at_resumes_sizes():
    """At a training batch of Resume's size (16 sentences of 60 characters, 40 words of lengths 2-4) the scores
    of the pairs with a character come from the products, not from R, and equal R's to float rounding; blocks of
    rows split where the products would exceed a block."""
    torch.manual_seed(4)
    d, heads_n, b, n, w = 160, 8, 16, 60, 40
    heads = torch.cat([torch.arange(n).expand(b, n), torch.randint(0, n - 4, (b, w))], 1)
    tails = torch.cat([torch.arange(n).expand(b, n), heads[:, n:] + torch.randint(1, 4, (b, w))], 1)
    rel = RelativeSpanEncoding(d, KINDS, naive=False)
    qv, wk = torch.randn(b, heads_n, n + w, 20), torch.randn(heads_n, 20, d) / 10
    table, offset = rel.tables(n - 1, heads.device)
    for first, rows, cols in [(0, slice(0, n), slice(None)), (n, slice(n, None), slice(0, n))]:
        q = qv[:, :, rows]
        via_r = rel._rows(torch.matmul(q, wk), table, heads, tails, first, cols, offset)
        products = rel._products(q, wk, table, heads, tails, rows, cols, offset)
        assert products is not None and torch.allclose(products, via_r, atol=1e-4)
    # a block of a few rows: the same scores, in pieces
    flat_module.BLOCK_ELEMENTS, saved = 8 * 5 * (2 * n - 1) * 3, flat_module.BLOCK_ELEMENTS
    try:
        pieces = rel._products(qv[:, :, :n], wk, table, heads, tails, slice(0, n), slice(None), offset)
    finally:
        flat_module.BLOCK_ELEMENTS = saved
    whole = rel._products(qv[:, :, :n], wk, table, heads, tails, slice(0, n), slice(None), offset)
    assert torch.allclose(pieces, whole, atol=1e-5)


def test_products_without_lexicon_words_equal_the_naive_formula():
    """The lexicon-free Transformer: every span is a character, so all scores come from one product per head."""
    torch.manual_seed(3)
    d, b, n = 8, 2, 9
    heads = torch.arange(n).expand(b, n)
    rel = RelativeSpanEncoding(d, KINDS, naive=False)
    qv, wk = torch.randn(b, 2, n, 4, requires_grad=True), torch.randn(2, 4, d, requires_grad=True)
    fast = rel.scores(qv, wk, heads, heads, n)
    grads = torch.autograd.grad(fast.pow(2).sum(), [qv, wk, *rel.parameters()])
    rel.naive = True
    naive = rel.scores(qv, wk, heads, heads)
    assert torch.allclose(fast, naive, atol=1e-5)
    for g1, g2 in zip(grads, torch.autograd.grad(naive.pow(2).sum(), [qv, wk, *rel.parameters()])):
        assert torch.allclose(g1, g2, atol=1e-4)


def flat_encoder(**kw):
    cfg = FlatConfig(d_model=16, heads=2, ff=24, ff_dropout=0.0, output_dropout=0.0, **kw)
    enc = cfg.build_in(6, {"lexicon": 5} if cfg.lattice else {})
    return enc.eval()


def batch_ctx(x_lengths, words):
    """A context for sentences of ``x_lengths`` characters, each with ``words`` [(head, tail), ...]."""
    b, n, w = len(x_lengths), max(x_lengths), max(len(ws) for ws in words)
    mask = torch.arange(n)[None] < torch.tensor(x_lengths)[:, None]
    heads = torch.zeros(b, w, dtype=torch.long)
    tails = torch.zeros(b, w, dtype=torch.long)
    wmask = torch.zeros(b, w, dtype=torch.bool)
    for i, ws in enumerate(words):
        for k, (h, t) in enumerate(ws):
            heads[i, k], tails[i, k], wmask[i, k] = h, t, True
    ctx = Context(mask, mask.sum(1), {"lexicon": {"heads": heads, "tails": tails, "mask": wmask}})
    return ctx, n, w


@pytest.mark.parametrize("variant", [{}, {"self_matched": False}, {"max_distance": 2}, {"distances": "hh"}])
def test_padding_gets_no_attention_and_changes_nothing(variant):
    torch.manual_seed(1)
    enc = flat_encoder(**variant)
    ctx, n, w = batch_ctx([6, 3], [[(0, 1), (0, 2), (2, 5), (4, 5)], [(1, 2)]])
    x = torch.randn(2, n, 6)
    ctx.published["lexicon"] = torch.randn(2, w, 5)
    with torch.no_grad():
        out = enc(x, ctx)
        # alone, unpadded: the second sentence with its one word
        ctx1, _, _ = batch_ctx([3], [[(1, 2)]])
        ctx1.published["lexicon"] = ctx.published["lexicon"][1:, :1]
        alone = enc(x[1:, :3], ctx1)
        assert torch.allclose(out[1, :3], alone[0], atol=1e-5)
        # garbage in every padded character and word slot changes no real output
        x2, words2 = x.clone(), ctx.published["lexicon"].clone()
        x2[1, 3:] = 1e3
        words2[1, 1:] = -1e3
        ctx.published["lexicon"] = words2
        assert torch.allclose(enc(x2, ctx)[:, :3], out[:, :3], atol=1e-5)
        # the attention weights themselves are 0 on padded keys
        e, heads, tails, keys = enc.spans(x, ctx)
        allowed = lattice_mask(heads, tails, keys, n, enc.self_matched, enc.max_distance)
        scores = enc.layers[0].attention_scores(e, heads, tails)
        weights = torch.softmax(scores.masked_fill(~allowed[:, None], torch.finfo(scores.dtype).min), -1)
        assert weights[1, :, :3][..., ~keys[1]].abs().max() == 0


def test_a_sentence_without_lexicon_words():
    torch.manual_seed(2)
    enc = flat_encoder()
    ctx, _n, w = batch_ctx([4], [[]])
    assert w == 0
    ctx.published["lexicon"] = torch.randn(1, 0, 5)
    x = torch.randn(1, 4, 6)
    with torch.no_grad():
        out = enc(x, ctx)
        ctx2, _, _ = batch_ctx([4, 5], [[], [(0, 3)]])  # batched with a sentence that has a word
        ctx2.published["lexicon"] = torch.randn(2, 1, 5)
        x2 = torch.randn(2, 5, 6)
        x2[0, :4] = x[0]
        out2 = enc(x2, ctx2)
    assert out.shape == (1, 4, 16) and torch.isfinite(out).all()
    assert torch.allclose(out2[0, :4], out[0], atol=1e-5)


def test_transformer_baseline_needs_no_lattice():
    enc = flat_encoder(lattice=None)
    mask = torch.tensor([[True, True, True, False]])
    out = enc(torch.randn(1, 4, 6), Context.of(mask))
    assert out.shape == (1, 4, 16)


# --------------------------------------------------------------------------------------------
# Config checks
# --------------------------------------------------------------------------------------------


def raw_config(corpus: Path, lexicon: Path, **flat) -> dict:
    return {
        "task": "ner",
        "data": {"format": "bmes", "train": str(corpus), "dev": str(corpus), "test": str(corpus), "scheme": "BMES"},
        "model": {
            "embedder": {
                "features": {
                    "char": {"type": "words", "dim": 16, "pretrained": None, "lowercase": False},
                    "bigram": {"type": "bigrams", "dim": 8},
                    "lexicon": {"type": "lattice", "lexicon": str(lexicon), "dim": 12, "dropout": 0.0},
                },
                "dropout": 0.0,
            },
            "encoders": [
                {"type": "flat", "d_model": 32, "heads": 4, "ff": 48, "ff_dropout": 0.0, "output_dropout": 0.0, **flat}
            ],
            "decoder": {"type": "crf", "constrained": True},
        },
        "train": {
            "optimizer": "adam",
            "lr": 0.01,
            "lr_decay": 0.0,
            "batch_size": 5,
            "max_epochs": 40,
            "patience": 40,
            "seed": 3,
            "batch_length": "lexicon",
        },
    }


def test_config_errors_name_the_key(tmp_path):
    raw = raw_config(tmp_path / "x", tmp_path / "y")
    raw["model"]["encoders"][0]["heads"] = 5
    with pytest.raises(SeqlabError, match=r"model.encoders.0.heads.*do not divide d_model 32"):
        config_from_dict(raw)
    raw = raw_config(tmp_path / "x", tmp_path / "y")
    raw["model"]["embedder"]["features"]["lexicon"] = None
    raw["train"]["batch_length"] = "tokens"
    with pytest.raises(SeqlabError, match=r"model.encoders.0.lattice.*no feature 'lexicon'"):
        config_from_dict(raw)


# --------------------------------------------------------------------------------------------
# The tagger end to end
# --------------------------------------------------------------------------------------------

PEOPLE = ["张三", "李四", "王小明", "赵丽", "陈刚"]
ORGS = ["北京大学", "华为技术有限公司", "清华大学", "中国银行", "南京大学"]
TITLES = ["工程师", "教授", "经理", "主任"]


def bmes(entity: str, typ: str) -> list[str]:
    if len(entity) == 1:
        return [f"S-{typ}"]
    return [f"B-{typ}"] + [f"M-{typ}"] * (len(entity) - 2) + [f"E-{typ}"]


def make_corpus(path: Path, n: int = 20, seed: int = 0) -> None:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        person, org, title = rng.choice(PEOPLE), rng.choice(ORGS), rng.choice(TITLES)
        parts = [(person, "NAME"), ("现任", None), (org, "ORG"), (title, "TITLE"), ("。", None)]
        if rng.random() < 0.5:
            parts = [(person, "NAME"), ("毕业于", None), (org, "ORG"), ("，", None)] + parts[1:]
        for text, typ in parts:
            labels = bmes(text, typ) if typ else ["O"] * len(text)
            lines += [f"{ch} {lab}" for ch, lab in zip(text, labels)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def flat_run(tmp_path_factory):
    from seqlab.training import train

    root = tmp_path_factory.mktemp("flat")
    corpus, lexicon = root / "train.bmes", root / "lexicon.txt"
    make_corpus(corpus)
    # jieba's format (word frequency tag), the model with its word tags and frequency classes
    tagged = [f"{w} {5 + k} nt" for k, w in enumerate(ORGS)]
    tagged += [
        f"{w} {50 * k + 1} n" for k, w in enumerate(["北京", "大学", "华为", "有限公司", "毕业", "工程", "工程师"])
    ]
    lexicon.write_text("\n".join([*tagged, "现任"]) + "\n", encoding="utf-8")
    raw = raw_config(corpus, lexicon)
    raw["model"]["embedder"]["features"]["lexicon"].update(word_tags=True, frequency_bins=6)
    result = train(config_from_dict(raw), root / "run", progress=False)
    return corpus, lexicon, root / "run", result


def test_flat_overfits_20_sentences(flat_run):
    _, _, _, result = flat_run
    assert result.test["f1"] == 100.0


def test_save_load_predict_identical_from_raw_text(flat_run, tmp_path):
    corpus, lexicon, run, _ = flat_run
    tagger = Tagger.load(run / "model")
    text = ["王小明毕业于清华大学，现任华为技术有限公司工程师。", "赵丽现任中国银行主任。", "无词"]
    before = tagger.predict(text)
    assert [s.text for s in before[0].spans] == ["王小明", "清华大学", "华为技术有限公司", "工程师"]
    lexicon.unlink()  # the model folder holds its lexicon: nothing else is read
    tagger.save(tmp_path / "copy")
    again = Tagger.load(tmp_path / "copy")
    assert [p.tags for p in again.predict(text)] == [p.tags for p in before]
    assert [p.tags for p in again.predict(text, batch_size=1)] == [p.tags for p in before]
    sentences = read_bmes(corpus)
    assert again.predict_tags(sentences, batch_size=1) == again.predict_tags(sentences)
    lattice = again.featurizers["lexicon"]
    assert "华为技术有限公司" in lattice.lexicon and len(lattice.lexicon) == 13
    assert lattice.lexicon.tag("清华大学") == "nt" and lattice.lexicon.frequency("清华大学") == 7
    assert lattice.lexicon.tag("现任") is None and lattice.lexicon.frequency("现任") is None


def test_flat_batches_side_by_side_predict_what_one_thread_does(flat_run):
    corpus, _, run, _ = flat_run
    assert_same_on_two_threads(Tagger.load(run / "model"), read_bmes(corpus), confidence=True)


def test_cli_predicts_raw_chinese_text_and_says_when_it_split(flat_run):
    _, _, run, _ = flat_run
    text = "张三毕业于北京大学，现任华为技术有限公司工程师。\n"
    seqlab = seqlab_command(dict(os.environ))  # python -m seqlab, forked from a server that has imported it
    proc = subprocess.run(
        [
            *seqlab,
            "predict",
            str(run / "model"),
            "-",
            "--output-format",
            "jsonl",
            "--max-length",
            "12",
        ],
        input=text,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    pred = json.loads(proc.stdout)
    assert pred["split_at"] == [10, 22] and len(pred["tags"]) == 24  # cut after "，"; nothing dropped
    assert "split at 10, 22 for tagging" in proc.stderr
    whole = json.loads(
        subprocess.run(
            [*seqlab, "predict", str(run / "model"), "-", "--output-format", "jsonl"],
            input=text,
            capture_output=True,
            text=True,
        ).stdout
    )
    assert whole["split_at"] is None


def test_tampered_lexicon_in_the_model_folder_is_an_error(flat_run, tmp_path):
    _, _, run, _ = flat_run
    Tagger.load(run / "model").save(tmp_path / "m")
    vocab = json.loads((tmp_path / "m" / "vocab.json").read_text(encoding="utf-8"))
    vocab["features"]["lexicon"]["lexicon"] = ["北京", 3]
    (tmp_path / "m" / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"features.lexicon.lexicon: expected a list of strings"):
        Tagger.load(tmp_path / "m")
    vocab["features"]["lexicon"]["lexicon"] = ["北京", "x"]
    (tmp_path / "m" / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    with pytest.raises(SeqlabError, match=r"'x' is not a lexicon word"):
        Tagger.load(tmp_path / "m")
    good = json.loads((run / "model" / "vocab.json").read_text(encoding="utf-8"))
    for key, value, says in [
        ("word_tags", [0] * 12, "expected 13 integers from 0 to 2"),  # one short
        ("word_tags", [0] * 12 + [3], "expected 13 integers from 0 to 2"),  # a tag beyond tag_names
        ("word_frequencies", [0] * 12 + [-1], "expected 13 integers"),
        ("tag_names", ["n", "n"], "expected at least 0 distinct strings"),
    ]:
        vocab = json.loads(json.dumps(good))
        vocab["features"]["lexicon"][key] = value
        (tmp_path / "m" / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
        with pytest.raises(SeqlabError, match=rf"features.lexicon.{key}: {says}"):
            Tagger.load(tmp_path / "m")


# --------------------------------------------------------------------------------------------
# Long sentences
# --------------------------------------------------------------------------------------------


def test_cuts_prefer_punctuation_and_never_split_a_chunk():
    tokens = list("张三毕业于北京大学，现任华为技术有限公司工程师。")
    assert cut_points(tokens, 30) == []
    assert cut_points(tokens, 12) == [10, 22]  # after "，"; then no mark in the window: at its end
    labels = ["O"] * 12 + bmes("华为技术有限公司", "ORG") + ["O"] * 4
    cuts = cut_points(tokens, 15, labels, "BMES")
    assert all(not (12 < c < 20) for c in cuts) and cuts == [10]
    # no safe cut in the window: cut at the window's end rather than drop anything
    assert cut_points(list("abcdef"), 2, ["B-X", "M-X", "M-X", "M-X", "M-X", "E-X"], "BMES") == [2, 4]


def test_training_splits_long_sentences_and_keeps_every_token():
    s = Sentence(list("甲乙丙。丁戊己。庚"), ["O"] * 9, "f.bmes", 10)
    pieces, split = split_long([s, Sentence(["子"], ["O"])], 4, "BMES")
    assert split == 1 and [len(p) for p in pieces] == [4, 4, 1, 1]
    assert [p.line for p in pieces[:3]] == [10, 14, 18]
    assert [t for p in pieces[:3] for t in p.tokens] == s.tokens


def test_warmup_is_linear_over_steps():
    from seqlab.config import TrainConfig
    from seqlab.training import learning_rate

    cfg = TrainConfig(lr=0.01, lr_decay=0.0, warmup_epochs=2)
    assert learning_rate(cfg, 0, 0, 10) == pytest.approx(0.01 / 20)
    assert learning_rate(cfg, 1, 4, 10) == pytest.approx(0.01 * 15 / 20)
    assert learning_rate(cfg, 2, 0, 10) == pytest.approx(0.01)


def test_lattice_feature_reports_the_lattice_length(tmp_path):
    lexicon = tmp_path / "l.txt"
    lexicon.write_text("\n".join(FIGURE1_WORDS) + "\n", encoding="utf-8")
    f = LatticeConfig(lexicon=str(lexicon), dim=4).build("lexicon")
    f.fit([Sentence(FIGURE1)], [], 0)
    encoded = f.encode(Sentence(FIGURE1))
    assert f.size(encoded) == 10
    batch = f.collate([encoded, f.encode(Sentence(list("人和")))], 6)
    assert batch["heads"].tolist() == [[0, 0, 2, 4], [0, 0, 0, 0]]
    assert batch["tails"].tolist() == [[1, 2, 5, 5], [0, 0, 0, 0]]
    assert batch["mask"].tolist() == [[True] * 4, [False] * 4]
    assert "tags" not in batch and "bins" not in batch  # without word classes: nothing more to pad


def test_lattice_words_start_from_a_vectors_file(tmp_path):
    """``pretrained`` word vectors: a training word and a dev-only word that have a vector start from it (the
    dev word gets a row of its own), a training word without one from the uniform init; the wrong size is an
    error naming the feature's ``dim`` key."""
    lexicon = tmp_path / "l.txt"
    lexicon.write_text("\n".join(FIGURE1_WORDS + ["北京", "不在"]) + "\n", encoding="utf-8")
    vectors = tmp_path / "vec.txt"
    vectors.write_text(f"{FIGURE1_WORDS[0]} 0.5 -0.25 1 2\n北京 3 4 5 6\n不在 9 9 9 9\n", encoding="utf-8")
    f = LatticeConfig(lexicon=str(lexicon), dim=4, pretrained=str(vectors), dropout=0.0).build("lexicon")
    f.fit([Sentence(FIGURE1)], [Sentence(list("北京药店"))], 0)
    table = f.module().embed.weight.detach()
    assert table[f.vocab.index(FIGURE1_WORDS[0])].tolist() == [0.5, -0.25, 1.0, 2.0]
    assert table[f.vocab.index("北京")].tolist() == [3.0, 4.0, 5.0, 6.0]  # dev-only, with a vector: its own row
    other = table[f.vocab.index(FIGURE1_WORDS[1])]
    assert 0 < other.abs().max() <= (3 / 4) ** 0.5  # no vector: uniform(-sqrt(3/dim), sqrt(3/dim))
    assert "不在" not in f.vocab.itos  # a lexicon word with a vector that the data never matches: no row
    wrong = LatticeConfig(lexicon=str(lexicon), dim=8, pretrained=str(vectors)).build("lexicon")
    with pytest.raises(SeqlabError, match="4 dimensions but the feature's dim is 8") as err:
        wrong.fit([Sentence(FIGURE1)], [], 0)
    assert "model.embedder.features.lexicon.dim" in str(err.value)


def test_lattice_words_carry_their_tag_and_frequency_class(tmp_path):
    """``word_tags`` and ``frequency_bins``: each matched word's tag row and frequency class (1 + floor(log2 f),
    capped), and its published vector the sum of its word, tag and class rows; the state restores them."""
    lexicon = tmp_path / "l.txt"
    lexicon.write_text("重庆 100 ns\n重庆人 3 n\n人和药店 1 nt x\n药店 40\n", encoding="utf-8")
    assert read_word_entries(lexicon)[2:] == [WordEntry("人和药店", 1, "nt"), WordEntry("药店", 40, None)]
    config = LatticeConfig(lexicon=str(lexicon), dim=4, word_tags=True, frequency_bins=4, dropout=0.0)
    f = config.build("lexicon")
    f.fit([Sentence(FIGURE1)], [], 0)
    assert f.tag_names == ["n", "ns", "nt"]
    tokens, words = f.encode(Sentence(FIGURE1))  # 重庆, 重庆人, 人和药店, 药店
    assert words[3].tolist() == [2, 1, 3, 0] and words[4].tolist() == [4, 2, 1, 4]  # 100 and 40: capped at 4
    assert all(frequency_bin(n, 64) == math.floor(math.log2(n)) + 1 for n in range(1, 5000))
    assert frequency_bin(None, 4) == frequency_bin(7, 0) == 0
    module = f.module()
    ctx = Context.of(torch.ones(1, len(FIGURE1), dtype=torch.bool))
    module(f.collate([(tokens, words)], tokens), ctx)
    rows = module.embed.weight[words[0]] + module.tag_embed.weight[words[3]] + module.bin_embed.weight[words[4]]
    assert torch.equal(ctx.published["lexicon"][0], rows)
    again = config.build("lexicon")
    again.load_state(json.loads(json.dumps(f.state())), "vocab.json: features.lexicon")
    assert np.array_equal(again.encode(Sentence(FIGURE1))[1], words) and again.tag_names == f.tag_names


def test_a_flat_training_step_gives_the_same_gradients_on_every_run(tmp_path):
    """The same weights and batch give every parameter the same gradient to the bit, run after run (as
    tests/test_training.py checks for the other models), R's lookups included."""
    from tests.conftest import assert_same_gradients_every_run

    corpus, lexicon = tmp_path / "train.bmes", tmp_path / "lexicon.txt"
    make_corpus(corpus, n=64, seed=1)
    lexicon.write_text(
        "\n".join(ORGS + ["北京", "大学", "华为", "有限公司", "毕业", "工程", "工程师", "现任"]) + "\n",
        encoding="utf-8",
    )
    assert_same_gradients_every_run(config_from_dict(raw_config(corpus, lexicon)))
