"""The encoder interface shared by every layer of the stack."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from torch import Tensor, nn


class LayerConfig(BaseModel):
    """Base of every config object: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Encoder(nn.Module):
    """A contextual layer.

    ``forward(x, mask)`` takes ``x`` of shape (batch, seq_len, input_dim) and a bool ``mask`` of shape
    (batch, seq_len), True on real tokens, and returns (batch, seq_len, output_dim). Values at padded
    positions of the output are unspecified; real positions must not depend on padding.
    Layers that can explain themselves (attention) also implement ``explain(x, mask)`` returning
    ``(output, dict_of_tensors)``.
    """

    output_dim: int

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError
