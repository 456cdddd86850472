"""Character encoders: the char BiLSTM against PyTorch's packed bidirectional LSTM, padding invariance."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from seqlab.features.chars import CharCNN, CharFeatures, CharLSTM
from tests.conftest import torch_threads


def _chars(lengths: list[int], width: int, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    out = torch.zeros(len(lengths), width, dtype=torch.long)
    for i, n in enumerate(lengths):
        out[i, :n] = torch.randint(1, 20, (n,), generator=gen)
    return out


def test_char_lstm_equals_packed_bidirectional_lstm():
    torch.manual_seed(0)
    enc = CharLSTM(20, 6, 8)
    oracle = nn.LSTM(6, 4, batch_first=True, bidirectional=True)
    enc.lstm.copy_weights_into(oracle)
    lengths = [1, 5, 3, 7, 2]
    chars = _chars(lengths, 7)
    packed = pack_padded_sequence(enc.chars(chars), torch.tensor(lengths), batch_first=True, enforce_sorted=False)
    _, (h, _) = oracle(packed)  # (2, words, 4)
    assert torch.allclose(enc(chars), torch.cat([h[0], h[1]], dim=-1), atol=1e-6)


@pytest.mark.parametrize("make", [lambda: CharLSTM(20, 6, 8), lambda: CharCNN(20, 6, 8, 3)])
def test_word_vector_does_not_depend_on_padding(make):
    """The same word gives the same vector whatever the width of the char matrix it sits in."""
    torch.manual_seed(0)
    enc = make().eval()
    narrow = _chars([3, 2], 3)
    wide = torch.zeros(2, 12, dtype=torch.long)
    wide[:, :3] = narrow
    with torch.no_grad():
        assert torch.allclose(enc(narrow), enc(wide), atol=1e-6)


def _char_cnn_by_conv1d(enc: CharCNN, chars: torch.Tensor) -> torch.Tensor:
    """The char CNN as ``conv1d`` over each word's characters (zeros beyond them), max over its characters."""
    x = enc.chars(chars).transpose(1, 2)  # (words, d, width)
    lengths = chars.ne(0).sum(1)
    out = []
    for k, window in zip(enc.kernels, enc.windows):
        left = k // 2
        weight = window.weight.view(window.out_features, x.shape[1], k)  # the window's (d, k) layout
        h = nn.functional.conv1d(nn.functional.pad(x, (left, k - 1 - left)), weight, window.bias)
        beyond = torch.arange(chars.shape[1])[None, None, :] >= lengths[:, None, None]
        out.append(h.masked_fill(beyond, float("-inf")).amax(2))  # (words, filters)
    return torch.cat(out, dim=-1)


@pytest.mark.parametrize("types", [False, True])
def test_char_cnn_in_training_packs_words_and_computes_what_conv1d_does(types):
    """On CPU the windows run over the words packed end to end, in export and on a GPU over the padded matrix:
    both equal conv1d with a masked max, and the gradients equal conv1d's, for even and odd widths."""
    from seqlab.features.chars import char_type_table

    torch.manual_seed(0)
    table = char_type_table(["<pad>"] + [chr(ord("a") + i) for i in range(10)] + list("ABCDE0123")) if types else None
    enc = CharCNN(20, 6, 5, [1, 2, 3, 5], table).double()
    # no character twice in a word: two equal windows tie for the max, and a tie's gradient may be split or
    # given to one of them depending on the last bit of each product (both are subgradients)
    gen = torch.Generator().manual_seed(3)
    chars = torch.zeros(7, 12, dtype=torch.long)
    for i, n in enumerate([1, 9, 3, 12, 2, 5, 1]):
        chars[i, :n] = torch.randperm(19, generator=gen)[:n] + 1
    oracle = _char_cnn_by_conv1d(enc, chars)
    grad = torch.randn_like(oracle)
    expected = torch.autograd.grad((oracle * grad).sum(), list(enc.parameters()))
    enc.train()
    packed = enc(chars)
    got = torch.autograd.grad((packed * grad).sum(), list(enc.parameters()))
    assert torch.allclose(packed, oracle, atol=1e-12)
    for g, e in zip(got, expected):
        assert torch.allclose(g, e, atol=1e-12)
    with torch.no_grad():
        assert torch.allclose(enc.eval()(chars), oracle, atol=1e-12)
        assert torch.allclose(enc._padded(chars), oracle, atol=1e-12)  # export's and the GPU's form


def _features(make) -> CharFeatures:

    torch.manual_seed(0)
    return CharFeatures(make()).eval()


def _run(features, chars: torch.Tensor) -> torch.Tensor:
    """(distinct_tokens, out) through CharFeatures.forward, each row its own one-token sentence."""
    from seqlab.nn.context import Context

    rows = torch.arange(len(chars))[:, None]  # (batch = distinct, seq = 1)
    ctx = Context.of(torch.ones(len(chars), 1, dtype=torch.bool))
    return features({"chars": chars, "rows": rows}, ctx)[:, 0]


@pytest.mark.parametrize("make", [lambda: CharLSTM(20, 6, 8), lambda: CharCNN(20, 6, 8, [1, 3])])
def test_inference_memo_gives_the_encoder_output(make):
    """Memoised vectors equal the encoder's on every batch, whatever mix of seen and new tokens and
    whatever padding width; a weight change empties the memo; training never reads it."""
    features = _features(make)
    first, second = _chars([3, 2, 5], 6, seed=1), _chars([4, 1], 9, seed=2)
    mixed = torch.zeros(4, 11, dtype=torch.long)  # two tokens of `first`, one of `second`, one new
    mixed[0, :3], mixed[1, :5], mixed[2, :4] = first[0, :3], first[2, :5], second[0, :4]
    mixed[3, :6] = _chars([6], 6, seed=3)[0]
    with torch.no_grad():
        for batch in (first, second, mixed, first):
            assert torch.allclose(_run(features, batch), features.encoder(batch), atol=1e-6)
        assert features._memo is not None and features._memo.used == 3 + 2 + 1
        before = _run(features, first)
        next(features.encoder.parameters()).add_(1.0)  # an optimiser step or a load
        after = _run(features, first)
        assert not torch.allclose(before, after) and torch.allclose(after, features.encoder(first), atol=1e-6)
        assert features._memo.used == 3
    features.train()
    out = _run(features, first)
    assert out.requires_grad and features._memo.used == 3  # computed by the encoder, memo untouched


def test_inference_memo_is_bounded_and_survives_deepcopy(monkeypatch):
    import copy

    import seqlab.features.chars as chars_module

    features = _features(lambda: CharCNN(20, 6, 8, 3))
    monkeypatch.setattr(chars_module, "MEMO_FLOATS", 8 * 4)  # room for 4 tokens of 8 floats
    with torch.no_grad():
        for seed in range(6):  # 3 new tokens per batch: the memo starts afresh when it would overflow
            batch = _chars([2, 3, 4], 4, seed=10 + seed)
            assert torch.allclose(_run(features, batch), features.encoder(batch), atol=1e-6)
            assert features._memo.used <= 4
        big = _chars([2] * 5, 2, seed=99)  # more distinct tokens than the memo holds: computed directly
        assert torch.allclose(_run(features, big), features.encoder(big), atol=1e-6)
        twin = copy.deepcopy(features)
        assert twin._memo is None and torch.equal(_run(twin, big), _run(features, big))
    with torch.inference_mode():  # a memo made in inference mode is written under no_grad later
        _run(twin, _chars([3], 3, seed=5))
    with torch.no_grad():
        batch = _chars([3, 2], 3, seed=6)
        assert torch.allclose(_run(twin, batch), twin.encoder(batch), atol=1e-6)


def test_inference_memo_from_two_threads_at_once_gives_the_encoder_output():
    """Batches tagged side by side share the memo: each thread's overlapping batches get the encoder's vectors,
    and every token ends up with one row, whichever thread added it."""
    import threading

    features = _features(lambda: CharCNN(20, 6, 8, [1, 3]))
    batches = [_chars([2, 3, 4, 5, 6], 7, seed=s % 7) for s in range(40)]  # 7 distinct batches, each 5 tokens
    with torch.no_grad():
        expected = [features.encoder(b) for b in batches]
    wrong = []

    def tag(part):
        with torch.no_grad():
            for k in part:
                if not torch.equal(_run(features, batches[k]), expected[k]):
                    wrong.append(k)

    threads = [threading.Thread(target=tag, args=(range(i, 40, 2),)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    memo = features._memo
    assert not wrong
    assert len(memo.rows) == 35 and len(set(memo.rows.tolist())) == 35 and 35 <= memo.used <= 70
    with torch.no_grad():
        for b, e in zip(batches[:7], expected):
            assert torch.equal(_run(features, b), e)


@pytest.mark.parametrize("multipliers", ["zeros", "ones"])
def test_inference_memo_with_colliding_hashes_still_gives_each_token_its_own_vector(multipliers, monkeypatch):
    """The memo finds tokens by a hash of their ids and confirms each match by the stored ids: with every hash
    equal (all multipliers 0), or equal for every reordering and padding of the same ids (all 1), each token
    still gets the encoder's own vector, batch after batch, from batches of any width."""
    import seqlab.features.chars as chars_module

    make = np.zeros if multipliers == "zeros" else np.ones
    monkeypatch.setattr(chars_module, "_MULTIPLIERS", make(1024, dtype=np.uint64))
    features = _features(lambda: CharCNN(20, 6, 8, [1, 3]))
    swapped = torch.tensor([[1, 2, 0, 0], [2, 1, 0, 0], [3, 0, 0, 0], [1, 2, 3, 0]])  # sums 3, 3, 3, 6
    batches = [swapped, _chars([3, 2, 5], 6, seed=1), swapped[[1, 0]], _chars([2, 5, 3], 9, seed=1), swapped]
    with torch.no_grad():
        for batch in batches:  # (the same vectors up to a product's last bit: other batches, other roundings)
            assert torch.allclose(_run(features, batch), features.encoder(batch), atol=1e-6)
    assert features._memo.used >= 1


def test_inference_memo_looks_tokens_up_across_batch_widths():
    """A token stored from a narrow batch is found in a wider one and the other way round, and a stored token
    that a longer one begins with is not taken for it."""
    features = _features(lambda: CharCNN(20, 6, 8, 3))
    narrow = torch.tensor([[4, 5, 0], [4, 5, 6]])
    wide = torch.tensor([[4, 5, 6, 7, 0, 0, 0], [4, 5, 0, 0, 0, 0, 0], [4, 5, 6, 0, 0, 0, 0]])
    with torch.no_grad():
        _run(features, narrow)
        used = features._memo.used
        assert torch.allclose(_run(features, wide), features.encoder(wide), atol=1e-6)
        assert features._memo.used == used + 1  # only [4, 5, 6, 7] was new
        assert torch.allclose(_run(features, narrow), features.encoder(narrow), atol=1e-6)
        assert features._memo.used == used + 1


def test_inference_memo_follows_weights_loaded_by_assignment():
    """load_state_dict(assign=True) replaces the Parameter objects: the memo must not serve the old ones."""
    features = _features(lambda: CharCNN(20, 6, 8, 3))
    other = _features(lambda: CharCNN(20, 6, 8, 3))
    with torch.no_grad():
        for q in other.parameters():
            q.add_(0.5)
        batch = _chars([3, 2], 4, seed=7)
        _run(features, batch)  # fills the memo with the old weights
        features.load_state_dict(other.state_dict(), assign=True)
        assert torch.allclose(_run(features, batch), other.encoder(batch), atol=1e-6)
        features.double()
        assert _run(features, batch).dtype == torch.float64


@pytest.mark.parametrize("sizes", [[1], [3, 1, 4], [24] * 6, [40] * 64, [5, 30, 1, 50, 12]])
def test_char_collation_stores_each_distinct_token_once_in_order_of_first_appearance(sizes, monkeypatch):
    """Both ways of collating (token by token, and whole-array from COLLATE_VECTOR_FROM tokens on) give the same
    tensors: each distinct token one row of char ids, in order of first appearance, and each position the row of
    its token; padding positions row 0."""
    import random

    import seqlab.features.chars as chars_module
    from seqlab.data.sentence import Sentence
    from seqlab.features.chars import CharsConfig

    rng = random.Random(sum(sizes))
    words = ["the", "The", "a", "bank", "banks", "x" * 45, "", "2,000", "of"] + [f"w{k}" for k in range(40)]
    sentences = [Sentence([rng.choice(words) for _ in range(n)]) for n in sizes]
    featurizer = CharsConfig(max_len=8).build("chars")
    featurizer.fit(sentences, [], 1)
    items = [featurizer.encode(s) for s in sentences]
    seq_len = max(sizes) + 2
    outputs = []
    for vector_from in (10**9, 1):
        monkeypatch.setattr(chars_module, "COLLATE_VECTOR_FROM", vector_from)
        outputs.append(featurizer.collate(items, seq_len))
    for key in ("chars", "rows"):
        assert torch.equal(outputs[0][key], outputs[1][key]) and outputs[1][key].dtype == torch.long
    chars, rows = outputs[1]["chars"], outputs[1]["rows"]
    seen = list(dict.fromkeys(t for s in sentences for t in s.tokens))  # distinct tokens, first appearance first
    assert chars.shape[0] == len(seen)
    for i, s in enumerate(sentences):
        for j, token in enumerate(s.tokens):
            ids = featurizer.encode(Sentence([token]))[0]
            assert rows[i, j] == seen.index(token)
            assert chars[rows[i, j], : len(ids)].tolist() == ids.tolist() and not chars[rows[i, j], len(ids) :].any()
        assert not rows[i, len(s.tokens) :].any()


def test_char_features_gradients_are_the_same_bits_on_every_run():
    """A batch's tokens repeat, so each distinct token's vector gets the sum of its positions' gradients. Spread by
    advanced indexing, that sum (index_put_ with accumulate on CPU) came out in a different order on every backward
    (200 of 200 runs differed in the last bits) and training runs with one seed drifted apart; by index_select
    its order is fixed."""
    from seqlab.nn.context import Context

    features = _features(lambda: CharCNN(20, 6, 64, [3])).train()
    g = torch.Generator().manual_seed(0)
    chars = _chars([3, 5, 2, 4, 6] * 10, 6, seed=4)  # 50 distinct tokens
    rows = torch.randint(0, 50, (64, 40), generator=g)  # 2,560 positions
    ctx = Context.of(torch.ones(64, 40, dtype=torch.bool))
    weights = torch.randn(64, 40, 64, generator=g)
    params = list(features.parameters())

    def gradients() -> list[torch.Tensor]:
        out = features({"chars": chars, "rows": rows}, ctx)  # (64, 40, 64)
        return torch.autograd.grad((out * weights).sum(), params)

    with torch_threads(2):  # the varying order comes from splitting the sum over threads
        first = gradients()
        for _ in range(30):
            assert all(torch.equal(a, b) for a, b in zip(first, gradients()))
