"""The word's casing class (lower, upper, title, mixed, numeric, ...) as a small embedding."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field
from torch import Tensor, nn

from seqlab.context import Context
from seqlab.data.sentence import Sentence
from seqlab.data.vocab import CASING_CLASSES, casing_class
from seqlab.errors import SeqlabError
from seqlab.features.base import FEATURES, FeatureConfig, FeatureModule, Featurizer, pad_ids


@FEATURES.register
class CasingConfig(FeatureConfig):
    type: Literal["casing"] = "casing"
    dim: int = Field(8, gt=0, le=1024, description="a small embedding of the casing class")

    def output_dim(self) -> int:
        return self.dim

    def build(self, name: str) -> "CasingFeaturizer":
        return CasingFeaturizer(name, self)


class CasingEmbedding(FeatureModule):
    def __init__(self, num_classes: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(num_classes, dim, padding_idx=0)
        self.output_dim = dim

    def forward(self, inputs: dict[str, Tensor], ctx: Context) -> Tensor:
        return self.embed(inputs["ids"])  # (batch, seq, dim)


class CasingFeaturizer(Featurizer):
    config: CasingConfig

    def __init__(self, name: str, config: CasingConfig):
        super().__init__(name, config)
        self._cache: dict[str, int] = {}

    def state(self) -> dict:
        return {"classes": list(CASING_CLASSES)}

    def load_state(self, state: Any, where: str) -> None:
        if not isinstance(state, dict) or state.get("classes") != list(CASING_CLASSES):
            raise SeqlabError(f"{where}.classes: the model's casing classes differ from this seqlab's "
                              f"({', '.join(CASING_CLASSES)})")

    def encode(self, sentence: Sentence) -> np.ndarray:
        cache = self._cache
        out = np.empty(len(sentence.tokens), dtype=np.int64)  # (seq_len,)
        for k, token in enumerate(sentence.tokens):
            c = cache.get(token)
            if c is None:
                c = casing_class(token)
                if len(cache) < 1_000_000:
                    cache[token] = c
            out[k] = c
        return out

    def collate(self, items: list[np.ndarray], seq_len: int) -> dict[str, Tensor]:
        return {"ids": pad_ids(items, seq_len)}  # (batch, seq_len), 0 = padding

    def module(self) -> CasingEmbedding:
        return CasingEmbedding(len(CASING_CLASSES), self.config.dim)
