"""The word's casing class (lower, upper, title, mixed, numeric, ...) as a small embedding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.data.sentence import Sentence
from seqlab.data.token_types import TypedTokens, TypeValues
from seqlab.data.vocab import CASING_CLASSES, CHIU_NICHOLS_CLASSES, casing_class, chiu_nichols_class
from seqlab.errors import SeqlabError
from seqlab.features.base import (
    FEATURES,
    FeatureConfig,
    FeatureModule,
    Featurizer,
    flat_tokens,
    memo_lookup,
    memo_values,
    pad_flat,
    pad_ids,
)
from seqlab.nn.context import Context


@FEATURES.register
class CasingConfig(FeatureConfig):
    type: Literal["casing"] = "casing"
    dim: int = Field(8, gt=0, le=1024, description="a small embedding of the casing class")
    classes: Literal["seqlab", "chiu_nichols"] = Field(
        "seqlab",
        description="seqlab: 8 classes (lower, upper, title, mixed, numeric, has_digit, punct, other); "
        "chiu_nichols: 4 (upper, upper-initial, lower, mixed), as Li et al. 2019",
    )
    one_hot: bool = Field(
        False,
        description="a fixed one-hot vector per class instead of a trained "
        "embedding (Li et al. 2019); dim is then the number of classes",
    )

    @property
    def table(self) -> tuple[str, ...]:
        return CASING_CLASSES if self.classes == "seqlab" else CHIU_NICHOLS_CLASSES

    def output_dim(self) -> int:
        return len(self.table) - 1 if self.one_hot else self.dim

    def build(self, name: str) -> CasingFeaturizer:
        return CasingFeaturizer(name, self)


class CasingEmbedding(FeatureModule):
    def __init__(self, num_classes: int, dim: int, one_hot: bool = False):
        super().__init__()
        if one_hot:  # row c > 0 is the unit vector e_{c-1}; padding row 0 is zeros; never trained
            dim = num_classes - 1
            self.embed = nn.Embedding(num_classes, dim, padding_idx=0)
            with torch.no_grad():
                self.embed.weight.copy_(torch.cat([torch.zeros(1, dim), torch.eye(dim)]))
            self.embed.weight.requires_grad_(False)
        else:
            self.embed = nn.Embedding(num_classes, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        return nn.functional.embedding(inputs["ids"], self.embed.weight, 0)  # (batch, seq, dim)


class CasingFeaturizer(Featurizer):
    config: CasingConfig

    def __init__(self, name: str, config: CasingConfig):
        super().__init__(name, config)
        self._cache: dict[str, int] = {}
        self._classify = casing_class if config.classes == "seqlab" else chiu_nichols_class
        self._by_type = TypeValues(self._classes)

    def _classes(self, tokens: list[str]) -> list[int]:
        return memo_values(self._cache, tokens, self._classify)

    def state(self) -> dict:
        return {"classes": list(self.config.table)}

    def load_state(self, state: Any, where: str) -> None:
        if not isinstance(state, dict) or state.get("classes") != list(self.config.table):
            raise SeqlabError(
                f"{where}.classes: the model's casing classes differ from this seqlab's "
                f"({', '.join(self.config.table)})"
            )

    def encode(self, sentence: Sentence) -> np.ndarray:
        return np.array(memo_lookup(self._cache, sentence.tokens, self._classify), dtype=np.int64)  # (seq_len,)

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len), 0 = padding

    def collate_sentences(self, sentences: Sequence[Sentence], seq_len: int) -> dict[str, Tensor]:
        tokens, lengths = flat_tokens(sentences)
        return {"ids": pad_flat(memo_lookup(self._cache, tokens, self._classify), lengths, seq_len)}

    def collate_types(self, typed: TypedTokens, seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_flat(self._by_type.of(typed), typed.lengths, seq_len)}  # (batch, seq_len), 0 = padding

    def module(self) -> CasingEmbedding:
        return CasingEmbedding(len(self.config.table), self.config.dim, self.config.one_hot)
