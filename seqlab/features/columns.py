"""A column of the input file as a feature: each token's value there (a part-of-speech tag, a chunk tag) as a
small embedding.

CoNLL-2000 ships each token's part of speech beside its chunk tag, and many corpora carry such columns. The
reader keeps every column other than the token and the label in ``Sentence.extra["columns"]``, in file order;
``column: 0`` is the first of them. The vocabulary is the training values (index 0 padding, 1 unknown: a value
unseen in training). The model then needs the same column at prediction time: input that lacks it (raw text,
a file with fewer columns) is refused with the file and line, never tagged without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.data.vocab import Vocab
from seqlab.errors import SeqlabError
from seqlab.features.base import FEATURES, FeatureConfig, FeatureModule, VocabFeaturizer, pad_ids
from seqlab.nn.context import Context


@FEATURES.register
class ColumnConfig(FeatureConfig):
    type: Literal["column"] = "column"
    column: int = Field(
        0,
        ge=0,
        le=63,
        description="which of the file's other columns (those besides token and label, in file order, from 0)",
    )
    dim: int = Field(16, gt=0, le=1024, description="the embedding of each value")
    min_count: int = Field(1, ge=1, le=1_000_000, description="values seen fewer times in training share <unk>")
    max_values: int = Field(
        10_000, ge=2, le=1_000_000, description="at most this many distinct values (the most frequent) get a row"
    )

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> ColumnFeaturizer:
        return ColumnFeaturizer(name, self)


class ColumnEmbedding(FeatureModule):
    def __init__(self, num_values: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_values, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        return self.embed(inputs["ids"])  # (batch, seq_len, dim); padding rows are zero


class ColumnFeaturizer(VocabFeaturizer):
    config: ColumnConfig

    def values(self, sentence: Sentence) -> list[str]:
        """The sentence's values in the configured column, or a one-line error naming its file and line."""
        columns = sentence.extra.get("columns")
        k = self.config.column
        if not columns or any(len(row) <= k for row in columns):
            have = min((len(row) for row in columns), default=0) if columns else 0
            raise SeqlabError(
                f"feature '{self.name}' reads column {k} besides token and label (counted from 0), but this input "
                f"has {have} such column{'s' if have != 1 else ''}: give the model a column file with it",
                path=sentence.source,
                line=sentence.line,
            )
        return [row[k] for row in columns]

    def columns(self) -> int:
        return self.config.column + 1

    def fit(self, train: Sequence[Sentence], other: Sequence[Sentence], seed: int) -> None:
        ranked = Vocab.from_counts(Counter(v for s in train for v in self.values(s)), self.config.min_count)
        self.set_vocab(Vocab(ranked.itos[2 : 2 + self.config.max_values]))  # the most frequent, ties by value

    def encode(self, sentence: Sentence) -> np.ndarray:
        index = self.vocab.index
        return np.array([index(v) for v in self.values(sentence)], dtype=np.int64)  # (seq_len,)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len), 0 = padding

    def module(self) -> ColumnEmbedding:
        return ColumnEmbedding(len(self.vocab), self.config.dim)

    def load_state(self, state: Any, where: str) -> None:
        super().load_state(state, where)
        if self.vocab.itos[:2] != ["<pad>", "<unk>"]:
            raise SeqlabError(f"{where}.itos: expected '<pad>' and '<unk>' first")
