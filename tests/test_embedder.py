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
