"""Character bigrams: each token paired with the next one (the last with an end marker), as a lookup
table. FLAT, lattice LSTM and TENER add them to the character embeddings of Chinese NER."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

import numpy as np
import torch
from pydantic import Field
from torch import Tensor

from seqlab.data.sentence import Sentence
from seqlab.features.base import FEATURES, FeatureConfig, VocabFeaturizer, pad_ids, unk_dropout_field
from seqlab.features.vectors import fit_vocab_and_table
from seqlab.features.words import WordEmbedding

END = "</s>"


@FEATURES.register
class BigramsConfig(FeatureConfig):
    type: Literal["bigrams"] = "bigrams"
    dim: int = Field(50, gt=0, le=4096, description="the bigram vectors of Zhang and Yang are 50d")
    pretrained: str | None = Field(
        None,
        description="a bigram vectors file (GloVe/word2vec text), or None: "
        "none is available offline here, so trained from scratch",
    )
    freeze: bool = Field(False, description="fine-tuned, as FLAT")
    min_count: int = Field(1, ge=1, le=1_000_000, description="bigrams seen fewer times map to <unk>")
    unk_dropout: float = unk_dropout_field("each bigram", "bigrams unseen in training")

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> BigramsFeaturizer:
        return BigramsFeaturizer(name, self)


def bigrams(tokens: Sequence[str]) -> list[str]:
    """token_i + token_{i+1} for every position, the last one paired with :data:`END`."""
    return [a + b for a, b in zip(tokens, [*tokens[1:], END])]


class BigramsFeaturizer(VocabFeaturizer):
    config: BigramsConfig

    def __init__(self, name: str, config: BigramsConfig):
        super().__init__(name, config)
        self._init: np.ndarray | None = None

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        c = self.config
        counts = Counter(b for s in train for b in bigrams(s.tokens))
        others = {b for s in other for b in bigrams(s.tokens)} if c.pretrained else set()
        vocab, self._init = fit_vocab_and_table(
            counts, others, c.pretrained, c.dim, c.min_count, seed, key=f"model.embedder.features.{self.name}.dim"
        )
        self.set_vocab(vocab)

    def encode(self, sentence: Sentence) -> np.ndarray:
        index = self.vocab.index
        return np.fromiter(
            (index(b) for b in bigrams(sentence.tokens)), dtype=np.int64, count=len(sentence.tokens)
        )  # (seq_len,)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len)

    def module(self) -> WordEmbedding:
        init = None if self._init is None else torch.from_numpy(self._init)
        self._init = None
        c = self.config
        return WordEmbedding(len(self.vocab), c.dim, init, c.freeze, c.unk_dropout, self.vocab.unk_index)
