"""Character features: each distinct token of a batch is encoded once by a char CNN or char BiLSTM.

Character encoders see padded characters as zero vectors (``padding_idx``) and mask them before
pooling, so a word's features never depend on the longest word of its batch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field, model_validator
from torch import Tensor, nn

from seqlab.context import Context
from seqlab.data.sentence import Sentence
from seqlab.data.vocab import Vocab
from seqlab.features.base import FEATURES, FeatureConfig, FeatureModule, Featurizer, pad_ids, string_list
from seqlab.lstm import BiLSTM
from seqlab.registry import ConfigCheckError, check_error


@FEATURES.register
class CharsConfig(FeatureConfig):
    type: Literal["chars"] = "chars"
    encoder: Literal["cnn", "lstm"] = Field("cnn", description="Ma and Hovy's char CNN by default")
    dim: int = Field(30, gt=0, le=1024, description="30d character embeddings (Ma and Hovy; PSA paper)")
    hidden: int = Field(50, gt=0, le=4096, description="CNN filters, or BiLSTM total size (PSA paper: 100)")
    kernel: int = Field(3, gt=0, le=15, description="CNN window of Ma and Hovy")
    max_len: int = Field(30, gt=0, le=1000, description="longer tokens (URLs, numbers) are cut for the char encoder")

    @model_validator(mode="after")
    def _even_lstm(self) -> "CharsConfig":
        if self.encoder == "lstm" and self.hidden % 2:
            raise check_error(ConfigCheckError(
                "hidden", f"a char BiLSTM needs an even size (two directions), got {self.hidden}"))
        return self

    def output_dim(self) -> int:
        return self.hidden

    def build(self, name: str) -> "CharsFeaturizer":
        return CharsFeaturizer(name, self)


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


class CharFeatures(FeatureModule):
    """Encodes each distinct token of the batch once and spreads the vectors over its positions."""

    def __init__(self, encoder: nn.Module):
        super().__init__()
        self.encoder = encoder
        self.output_dim = encoder.output_dim

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        distinct = self.encoder(inputs["chars"])  # (distinct_tokens, out)
        per_token = distinct[inputs["rows"]]  # (batch, seq, out)
        return per_token * ctx.mask.unsqueeze(-1)  # zero on padding


class CharsFeaturizer(Featurizer):
    config: CharsConfig

    def __init__(self, name: str, config: CharsConfig):
        super().__init__(name, config)
        self.vocab = Vocab([])
        self._cache: dict[str, np.ndarray] = {}  # token -> its char ids; one array per token type

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        self.vocab = Vocab.from_counts(Counter(c for s in train for t in s.tokens for c in t))
        self._cache.clear()

    def state(self) -> dict:
        return {"itos": self.vocab.itos}

    def load_state(self, state: Any, where: str) -> None:
        self.vocab = Vocab.from_list(string_list(state, "itos", where, min_len=2))
        self._cache.clear()

    def _token(self, token: str) -> np.ndarray:
        hit = self._cache.get(token)
        if hit is None:
            chars = token[: self.config.max_len]
            hit = (np.fromiter((self.vocab.index(c) for c in chars), dtype=np.int64, count=len(chars))
                   if chars else np.ones(1, dtype=np.int64))
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def encode(self, sentence: Sentence) -> list[np.ndarray]:
        return [self._token(t) for t in sentence.tokens]

    def collate(self, items: list[list[np.ndarray]], seq_len: int) -> dict[str, Tensor]:
        """Equal tokens share one char array (memoised), so each distinct token is stored once."""
        rows: dict[int, int] = {}  # id(char array) -> row
        distinct: list[np.ndarray] = []
        token_rows = []
        for sentence in items:
            r = np.empty(len(sentence), dtype=np.int64)
            for j, cj in enumerate(sentence):
                row = rows.get(id(cj))
                if row is None:
                    row = rows[id(cj)] = len(distinct)
                    distinct.append(cj)
                r[j] = row
            token_rows.append(r)
        chars = np.zeros((len(distinct), max(len(c) for c in distinct)), dtype=np.int64)
        for i, cj in enumerate(distinct):
            chars[i, : len(cj)] = cj
        # chars: (distinct_tokens, max_word_len), 0 = padding; rows: (batch, seq_len) row of each token
        return {"chars": torch.from_numpy(chars), "rows": pad_ids(token_rows, seq_len)}

    def module(self) -> CharFeatures:
        c = self.config
        if c.encoder == "cnn":
            return CharFeatures(CharCNN(len(self.vocab), c.dim, c.hidden, c.kernel))
        return CharFeatures(CharLSTM(len(self.vocab), c.dim, c.hidden))
