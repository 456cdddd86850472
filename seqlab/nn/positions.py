"""Absolute position signals added to a sequence's inputs (PSA's encoder, the DT encoder and GCDT's decoder)."""

from __future__ import annotations

import math

import torch
from torch import Tensor


def sinusoidal_positions(seq_len: int, dim: int, device: torch.device | None = None) -> Tensor:
    """Vaswani et al.'s absolute encoding: sin on even features, cos on odd. Shape (seq_len, dim)."""
    pos = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None]  # (seq, 1)
    freq = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )  # (ceil(dim/2),)
    angle = pos * freq  # (seq, ceil(dim/2))
    # interleaved without in-place slice writes (which tracing for export does not follow)
    return torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).flatten(1)[:, :dim]  # (seq, dim)
