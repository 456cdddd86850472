"""Bidirectional LSTM encoder (packed, so padding never reaches the recurrence)."""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.encoders.base import Encoder, LayerConfig


class BiLSTMConfig(LayerConfig):
    type: Literal["bilstm"] = "bilstm"
    hidden: int = Field(200, gt=0, description="total output size (both directions); 200 as in Lample et al.")
    layers: int = Field(1, gt=0, description="one layer is the papers' setting")
    dropout: float = Field(0.5, ge=0.0, lt=1.0, description="on the output and between layers")

    def build(self, input_dim: int) -> "BiLSTMEncoder":
        return BiLSTMEncoder(input_dim, self.hidden, self.layers, self.dropout)


class BiLSTMEncoder(Encoder):
    def __init__(self, input_dim: int, hidden: int, layers: int = 1, dropout: float = 0.5):
        super().__init__()
        if hidden % 2:
            raise ValueError(f"BiLSTM hidden size must be even (two directions), got {hidden}")
        self.lstm = nn.LSTM(input_dim, hidden // 2, num_layers=layers, batch_first=True,
                            bidirectional=True, dropout=dropout if layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
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
                p.data[n:2 * n] = 0.5  # bias_ih and bias_hh add up to 1

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        lengths = mask.sum(1).cpu()  # (batch,)
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = self.lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])  # (batch, seq, hidden)
        return self.dropout(out)
