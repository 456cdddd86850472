"""Bidirectional LSTM encoder (padding never reaches a real token: see :mod:`seqlab.nn.lstm`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator
from torch import Tensor, nn

from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.nn.lstm import BiLSTM


@ENCODERS.register
class BiLSTMConfig(EncoderConfig):
    type: Literal["bilstm"] = "bilstm"
    hidden: int = Field(200, gt=0, le=16384, description="total output size (both directions); 200 as in Lample et al.")
    layers: int = Field(1, gt=0, le=16, description="one layer is the papers' setting")
    dropout: float = Field(0.5, ge=0.0, lt=1.0, description="on the output and between layers")
    stacking: Literal["cross", "per_direction"] = Field(
        "cross",
        description="cross: each layer reads both directions of the layer below (Li et al. 2019's "
        "cross-Bi-LSTM); per_direction: each direction stacked on its own, joined at the "
        "top (their Bi-LSTM-CNN baseline). Same with one layer",
    )

    @field_validator("hidden")
    @classmethod
    def _even(cls, v: int) -> int:
        if v % 2:
            raise ValueError(f"a BiLSTM's size must be even (two directions of hidden/2), got {v}")
        return v

    def output_dim(self, input_dim: int) -> int:
        return self.hidden

    def build(self, input_dim: int) -> BiLSTMEncoder:
        return BiLSTMEncoder(input_dim, self.hidden, self.layers, self.dropout, self.stacking == "cross")


class BiLSTMEncoder(Encoder):
    def __init__(self, input_dim: int, hidden: int, layers: int = 1, dropout: float = 0.5, cross: bool = True):
        super().__init__()
        assert hidden % 2 == 0, hidden  # the config rejects odd sizes
        self.lstm = BiLSTM(input_dim, hidden // 2, layers, dropout, cross=cross)
        self.dropout = Dropout(dropout)
        self.output_dim = hidden
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for name, p in self.lstm.named_parameters():
            if "weight" in name:
                nn.init.xavier_uniform_(p)
            else:
                nn.init.zeros_(p)
                # forget-gate bias 1: the usual choice for stable early training
                n = p.shape[0] // 4
                p.data[n : 2 * n] = 0.5  # bias_ih and bias_hh add up to 1

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        out = self.lstm(x, ctx.lengths.clamp(min=1))  # (batch, seq, hidden)
        return self.dropout(out * ctx.mask.unsqueeze(2))  # zeros on padding
