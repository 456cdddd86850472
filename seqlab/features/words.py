"""Word ids: a lookup table over (lower-cased) training words, initialised from pre-trained vectors."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab import rows
from seqlab.context import Context
from seqlab.data.sentence import Sentence
from seqlab.data.vocab import normalize_word
from seqlab.features.base import (FEATURES, FeatureConfig, FeatureModule, VocabFeaturizer, flat_tokens, memo_lookup,
                                  memo_values, pad_flat, pad_ids)
from seqlab.data.token_types import TypedTokens, TypeValues
from seqlab.vectors import fit_vocab_and_table


@FEATURES.register
class WordsConfig(FeatureConfig):
    type: Literal["words"] = "words"
    dim: int = Field(50, gt=0, le=4096, description="GloVe 6B 50d is the vector set available offline")
    pretrained: str | None = Field(
        "glove-6b-50d", description="'glove-6b-50d' (PyPI package), a GloVe/word2vec text file (.gz ok), or None")
    freeze: bool = Field(False, description="the papers fine-tune the word embeddings")
    lowercase: bool = Field(True, description="GloVe 6B is uncased; casing is kept by the casing feature")
    min_count: int = Field(1, ge=1, le=1_000_000, description="keep every training word; rare ones still get trained")
    replace_digits: bool = Field(False, description="map digits to 0 before lookup (NCRF++ option)")

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> "WordsFeaturizer":
        return WordsFeaturizer(name, self)


class WordEmbedding(FeatureModule):
    def __init__(self, num_words: int, dim: int, init: Tensor | None, freeze: bool):
        super().__init__()
        self.embed = nn.Embedding(num_words, dim, padding_idx=0)
        if init is not None:
            self.embed.weight.data.copy_(init)
        self.embed.weight.requires_grad_(not freeze)
        self.output_dim = dim
        rows.mark(self.embed.weight)  # read only through rows.lookup: SGD may update it by rows (seqlab.rows)
        self.register_state_dict_pre_hook(_flush_rows)

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        # a function, not the module's call (hooks, dispatch): it counts at batch 1
        return rows.lookup(inputs["ids"], self.embed.weight, 0)  # (batch, seq, dim); padding: 0

    def train(self, mode: bool = True):
        if not mode:
            rows.flush(self.embed.weight)  # evaluation reads it whole
        return super().train(mode)


def _flush_rows(module: WordEmbedding, prefix: str, keep_vars: bool) -> None:
    """Before a state_dict: the table's pending row updates applied (seqlab.rows)."""
    rows.flush(module.embed.weight)


class WordsFeaturizer(VocabFeaturizer):
    config: WordsConfig

    def __init__(self, name: str, config: WordsConfig):
        super().__init__(name, config)
        self._init: np.ndarray | None = None  # pre-trained table after fit, until the module is made

    def _per_type(self) -> TypeValues:
        return TypeValues(self._ids)

    def _norm(self, token: str) -> str:
        return normalize_word(token, self.config.lowercase, self.config.replace_digits)

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        c = self.config
        counts = Counter(self._norm(t) for s in train for t in s.tokens)
        others = {self._norm(t) for s in other for t in s.tokens} if c.pretrained else set()
        vocab, self._init = fit_vocab_and_table(counts, others, c.pretrained, c.dim, c.min_count, seed,
                                                key=f"model.embedder.features.{self.name}.dim")
        self.set_vocab(vocab)

    def _id(self, token: str) -> int:
        return self.vocab.index(self._norm(token))

    def _ids(self, tokens: list[str]) -> list[int]:
        return memo_values(self._cache, tokens, self._id)

    def encode(self, sentence: Sentence) -> np.ndarray:
        return np.array(memo_lookup(self._cache, sentence.tokens, self._id), dtype=np.int64)  # (seq_len,)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len)

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, Tensor]:
        tokens, lengths = flat_tokens(sentences)
        return {"ids": pad_flat(memo_lookup(self._cache, tokens, self._id), lengths, seq_len)}  # (batch, seq_len)

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_flat(self._by_type.of(typed), typed.lengths, seq_len)}  # (batch, seq_len)

    def module(self) -> WordEmbedding:
        init = None if self._init is None else torch.from_numpy(self._init)
        self._init = None  # the table lives on in the module's weights
        return WordEmbedding(len(self.vocab), self.config.dim, init, self.config.freeze)
