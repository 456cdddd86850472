"""Token representations: the featurizers' embedding modules, concatenated, then dropout.

Each module is registered under its featurizer's name, so a default model's weights are named
``embedder.word.*``, ``embedder.char.*``, ``embedder.casing.*``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from seqlab.features.base import FeatureModule
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout

RESERVED = frozenset({"dropout", "names"})  # attributes of Embedder that a feature name would shadow


class Embedder(nn.Module):
    """Maps a batch's feature tensors to (batch, seq_len, output_dim)."""

    def __init__(self, modules: dict[str, FeatureModule], dropout: float):
        super().__init__()
        for name, module in modules.items():
            assert name not in RESERVED, name
            self.add_module(name, module)
        self.names = list(modules)
        self.dropout = Dropout(dropout)
        self.output_dim = sum(m.output_dim for m in modules.values())

    def forward(self, ctx: Context) -> Tensor:
        parts = []
        for name in self.names:
            out = self._modules[name](ctx.inputs[name], ctx)  # (batch, seq, dim) or None (publishes only)
            if out is not None:
                parts.append(out)
        x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)  # (batch, seq, output_dim)
        return self.dropout(x)
