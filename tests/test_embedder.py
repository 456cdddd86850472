"""Character encoders: the char BiLSTM against PyTorch's packed bidirectional LSTM, padding invariance."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

from seqlab.features.chars import CharCNN, CharLSTM


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


def _char_features(make, memo_size: int = 100_000):
    from seqlab.features.chars import CharFeatures
    torch.manual_seed(0)
    return CharFeatures(make(), memo_size).eval()


def _run(module, chars: torch.Tensor) -> torch.Tensor:
    """The module on a batch of one sentence whose tokens are the rows of ``chars``."""
    from seqlab.context import Context
    rows = torch.arange(chars.shape[0])[None]  # (1, words)
    mask = torch.ones(1, chars.shape[0], dtype=torch.bool)
    return module({"chars": chars, "rows": rows}, Context(mask, mask.sum(1), {}))[0]  # (words, out)


@pytest.mark.parametrize("make", [lambda: CharLSTM(20, 6, 8), lambda: CharCNN(20, 6, 8, [1, 3])])
def test_inference_memo_gives_the_encoders_vectors(make):
    """Memoised word vectors (eval, no gradients, CPU) are the encoder's, for words first seen in
    batches of other widths and companions; the memo is not used while training or with gradients."""
    plain, memo = _char_features(make, 0), _char_features(make)
    memo.load_state_dict(plain.state_dict())
    first, second = _chars([3, 5, 1], 5, seed=1), _chars([2, 4], 9, seed=2)
    second[0] = 0
    second[0, :5] = first[0]  # word 0 again, in a wider batch beside a new word
    with torch.inference_mode():
        for chars in (first, second, first):
            torch.testing.assert_close(_run(memo, chars), _run(plain, chars), rtol=0, atol=1e-6)
    assert len(memo._memo.rows) == 4  # 3 + 1 new word
    with torch.no_grad():  # outside inference mode the result is an ordinary tensor
        out = _run(memo, first)
        assert not out.is_inference()
        out.add_(1.0)  # and can be changed in place
    memo.train()
    before = dict(memo._memo.rows)
    with torch.no_grad():
        _run(memo, _chars([6], 6, seed=3))
    assert memo._memo.rows == before  # training mode: the encoder runs, the memo is untouched


def test_inference_memo_is_dropped_when_weights_change_or_it_is_full():
    memo = _char_features(lambda: CharCNN(20, 6, 8, 3), memo_size=5)
    chars = _chars([3, 2, 4], 4)
    with torch.inference_mode():
        old = _run(memo, chars)
    with torch.no_grad():
        memo.encoder.windows[0].weight.mul_(2.0)  # an optimiser step changes weights in place
    with torch.inference_mode():
        new = _run(memo, chars)
        assert not torch.allclose(old, new)
        torch.testing.assert_close(new, memo.encoder(chars), rtol=0, atol=1e-6)
        _run(memo, _chars([1, 2, 3], 3, seed=7))  # 3 + 3 words > 5: starts over
    assert len(memo._memo.rows) == 3


def test_inference_memo_is_safe_across_threads():
    from concurrent.futures import ThreadPoolExecutor
    memo, plain = _char_features(lambda: CharCNN(20, 6, 8, 3)), _char_features(lambda: CharCNN(20, 6, 8, 3), 0)
    batches = [_chars([1 + (i + j) % 7 for j in range(6)], 8, seed=i) for i in range(40)]
    with torch.inference_mode():
        expected = [_run(plain, c) for c in batches]

    def run(i: int) -> torch.Tensor:
        with torch.inference_mode():
            return _run(memo, batches[i])
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(run, range(40)))
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, rtol=0, atol=1e-6)
