"""Token representations: word lookup + character features + casing, concatenated.

Character encoders see padded characters as zero vectors (``padding_idx``) and mask them before
pooling, so a word's features never depend on the longest word of its batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.data.batching import Batch
from seqlab.lstm import BiLSTM


class CharCNN(nn.Module):
    """Ma and Hovy (2016): char embeddings -> 1-d convolution -> masked max over characters.

    The convolution is written as unfold + one matrix product: for these tiny inputs (a few hundred
    words of ~10 characters) that is several times faster on CPU than a conv1d call, forward and backward.
    """

    def __init__(self, num_chars: int, dim: int, filters: int, kernel: int):
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        self.kernel = kernel
        self.window = nn.Linear(dim * kernel, filters)  # one filter bank over a (kernel x dim) window
        self.output_dim = filters

    def forward(self, chars: Tensor) -> Tensor:
        """chars (words, max_word_len) -> (words, filters)"""
        char_mask = chars.ne(0)  # (words, chars)
        x = self.embed(chars)  # (words, chars, dim); padding characters are zero vectors
        left = self.kernel // 2
        x = nn.functional.pad(x, (0, 0, left, self.kernel - 1 - left))  # (words, chars + kernel - 1, dim)
        windows = x.unfold(1, self.kernel, 1)  # (words, chars, dim, kernel)
        h = self.window(windows.flatten(2))  # (words, chars, filters)
        h = h.masked_fill(~char_mask.unsqueeze(2), float("-inf"))
        return h.max(dim=1).values


class CharLSTM(nn.Module):
    """Lample et al. (2016): char BiLSTM; the word is the concatenation of the two final states
    (the forward state after the last character, the backward state after the first)."""

    def __init__(self, num_chars: int, dim: int, hidden: int):
        super().__init__()
        self.embed = nn.Embedding(num_chars, dim, padding_idx=0)
        self.lstm = BiLSTM(dim, hidden // 2, packed_inference=True)  # ragged rows: pack when not training
        self.output_dim = 2 * (hidden // 2)

    def forward(self, chars: Tensor) -> Tensor:
        """chars (words, max_word_len), right-padded with 0 -> (words, hidden)"""
        lengths = chars.ne(0).sum(1).clamp(min=1)  # (words,)
        out_f, out_b = self.lstm.directions(self.embed(chars), lengths)  # (words, len, hidden/2) each
        last = out_f.gather(1, (lengths - 1)[:, None, None].expand(-1, 1, out_f.shape[2])).squeeze(1)
        return torch.cat([last, out_b[:, 0]], dim=-1)  # (words, hidden)


class Embedder(nn.Module):
    """Maps a :class:`Batch` to (batch, seq_len, output_dim)."""

    def __init__(self, num_words: int, word_dim: int, num_chars: int, char_type: str, char_dim: int,
                 char_hidden: int, char_kernel: int, casing_dim: int, num_casing: int, dropout: float,
                 pretrained: Tensor | None = None, freeze: bool = False):
        super().__init__()
        self.word = nn.Embedding(num_words, word_dim, padding_idx=0)
        if pretrained is not None:
            self.word.weight.data.copy_(pretrained)
        self.word.weight.requires_grad_(not freeze)
        self.char: nn.Module | None = None
        if char_type == "cnn":
            self.char = CharCNN(num_chars, char_dim, char_hidden, char_kernel)
        elif char_type == "lstm":
            self.char = CharLSTM(num_chars, char_dim, char_hidden)
        self.casing = nn.Embedding(num_casing, casing_dim, padding_idx=0) if casing_dim else None
        self.dropout = nn.Dropout(dropout)
        self.output_dim = word_dim + (self.char.output_dim if self.char else 0) + casing_dim

    def forward(self, batch: Batch) -> Tensor:
        parts = [self.word(batch.words)]  # (batch, seq, word_dim)
        if self.char is not None:
            distinct = self.char(batch.chars)  # (distinct_tokens, char_out): each token type once
            per_token = distinct[batch.token_chars]  # (batch, seq, char_out)
            parts.append(per_token * batch.mask.unsqueeze(-1))  # zero on padding
        if self.casing is not None:
            parts.append(self.casing(batch.casing))
        return self.dropout(torch.cat(parts, dim=-1))
