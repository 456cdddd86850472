"""What the attention layers publish for a sentence, sliced out of a batch: ``predict(..., explain=True)``."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class LayerExplanation:
    """What one encoder layer published for a sentence: attention weights (tokens x tokens, rows sum
    to 1; the mean over heads for a multi-head layer, whose heads are in ``heads``) and the mean fusion
    gate per token, where the layer has them."""

    layer: int
    attention: list[list[float]] | None = None
    gate_mean: list[float] | None = None
    heads: list[list[list[float]]] | None = None


def explain(published: dict[str, torch.Tensor], row: int, n: int, num_layers: int) -> list[LayerExplanation]:
    """Per encoder layer that published attention (and a gate), this sentence's slice."""
    out = []
    for i in range(num_layers):
        attention = published.get(f"encoders.{i}.attention")
        if attention is None:
            continue
        gate = published.get(f"encoders.{i}.gate")
        heads = None
        if attention.dim() == 4:  # (batch, heads, n, n)
            heads = attention[row, :, :n, :n]
            attention = attention.mean(1)
        out.append(
            LayerExplanation(
                i,
                attention[row, :n, :n].tolist(),
                None if gate is None else gate[row, :n].mean(-1).tolist(),
                None if heads is None else heads.tolist(),
            )
        )
    return out
