"""GCDT's encoders (Liu et al. 2019, paper 004): deep-transition RNN layers and the global contextual
encoder.

``dt``: a (bi)directional deep-transition RNN (see :mod:`seqlab.nn.dt`), or a conventional GRU with
``cell: gru``; ``layers > 1`` stacks them (the "stacked DT" of Table 6).

``global_context``: an independent bidirectional DT over the layer's input, pooled over the sentence
under the mask into one vector g (Eqs. 4-7; mean, as the paper, or max or attention). The layer
publishes g as ``global``; with ``placement: encoder_input`` it also returns [x; g] for every token
(Eq. 3), otherwise it returns x unchanged and a decoder configured for ``decoder_input`` or
``softmax_input`` reads g from the context (Table 5). "No global context" is a stack without the layer.
"""

from __future__ import annotations

from typing import Literal

import torch
from pydantic import Field, field_validator, model_validator
from torch import Tensor, nn

from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.nn.dt import DTRNN, BiDTRNN
from seqlab.registry import ConfigCheckError, LayerConfig, check_error


class DTOptions(LayerConfig):
    """Cell options shared by the GCDT encoders and decoder."""

    transitions: int = Field(4, ge=0, le=16, description="T-GRUs after the L-GRU per token (L); 4 in the paper")
    cell: Literal["dt", "gru"] = Field("dt", description="dt: L-GRU + L T-GRUs; gru: a conventional GRU baseline")
    layer_norm: bool = Field(False, description="layer-normalised gates (an option of the authors' code)")
    cell_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="dropout on the state between transitions (an option of the authors' code)"
    )
    position_signal: bool = Field(
        False, description="add a sinusoidal position signal to the inputs (an option of the authors' code)"
    )

    def rnn_options(self) -> dict:
        return {
            "transitions": self.transitions,
            "cell": self.cell,
            "layer_norm": self.layer_norm,
            "cell_dropout": self.cell_dropout,
            "position_signal": self.position_signal,
        }


def _even(v: int) -> int:
    if v % 2:
        raise ValueError(f"a bidirectional layer's size must be even (two directions of hidden/2), got {v}")
    return v


@ENCODERS.register
class DTConfig(EncoderConfig, DTOptions):
    type: Literal["dt"] = "dt"
    hidden: int = Field(
        512,
        gt=0,
        le=16384,
        description="output size, both directions together: the paper's "
        "sequence labeling encoder has 256 per direction",
    )
    layers: int = Field(1, gt=0, le=8, description="stacked DT layers (Table 6's stacked-DT: 2)")
    bidirectional: bool = Field(True, description="the paper's encoders are bidirectional")
    dropout: float = Field(0.3, ge=0.0, lt=1.0, description="on the hidden states, 0.3 in the paper")

    @model_validator(mode="after")
    def _hidden_even(self) -> DTConfig:
        if self.bidirectional and self.hidden % 2:
            raise check_error(
                ConfigCheckError(
                    "hidden",
                    f"a bidirectional layer's size must be even (two directions of hidden/2), got {self.hidden}",
                )
            )
        return self

    def output_dim(self, input_dim: int) -> int:
        return self.hidden

    def build(self, input_dim: int) -> DTEncoder:
        return DTEncoder(input_dim, self)


class DTEncoder(Encoder):
    def __init__(self, input_dim: int, config: DTConfig):
        super().__init__()
        dims = [input_dim] + [config.hidden] * (config.layers - 1)
        self.bidirectional = config.bidirectional
        if config.bidirectional:
            self.layers = nn.ModuleList(BiDTRNN(d, config.hidden // 2, **config.rnn_options()) for d in dims)
        else:
            self.layers = nn.ModuleList(DTRNN(d, config.hidden, **config.rnn_options()) for d in dims)
        self.dropout = Dropout(config.dropout)
        self.output_dim = config.hidden

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = self.dropout(x) if i else x
            x = layer(x, ctx.lengths.clamp(min=1)) if self.bidirectional else layer(x)  # (batch, seq, hidden)
        return self.dropout(x * ctx.mask.unsqueeze(-1))


@ENCODERS.register
class GlobalContextConfig(EncoderConfig, DTOptions):
    type: Literal["global_context"] = "global_context"
    hidden: int = Field(256, gt=0, le=16384, description="size of g: the paper's global encoder has 128 per direction")
    pooling: Literal["mean", "max", "attention"] = Field("mean", description="over the sentence (Eq. 4: mean)")
    placement: Literal["encoder_input", "decoder_input", "softmax_input"] = Field(
        "encoder_input",
        description="where g goes (Table 5): appended to each token's input of the next "
        "layer (Eq. 3), or only published for a decoder that reads it",
    )
    dropout: float = Field(0.3, ge=0.0, lt=1.0, description="on g")

    @field_validator("hidden")
    @classmethod
    def _hidden_even(cls, v: int) -> int:
        return _even(v)

    def output_dim(self, input_dim: int) -> int:
        return input_dim + self.hidden if self.placement == "encoder_input" else input_dim

    def published_sizes(self, input_dim: int) -> dict[str, int]:
        return {"global": self.hidden}

    def build(self, input_dim: int) -> GlobalContextEncoder:
        return GlobalContextEncoder(input_dim, self)


class GlobalContextEncoder(Encoder):
    def __init__(self, input_dim: int, config: GlobalContextConfig):
        super().__init__()
        self.rnn = BiDTRNN(input_dim, config.hidden // 2, **config.rnn_options())
        self.pooling, self.placement = config.pooling, config.placement
        self.score = nn.Linear(config.hidden, 1) if config.pooling == "attention" else None
        self.dropout = Dropout(config.dropout)
        self.output_dim = config.output_dim(input_dim)
        if self.placement == "encoder_input":
            self.columns = {"x": (0, input_dim), "g": (input_dim, self.output_dim)}

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        h = self.rnn(x, ctx.lengths.clamp(min=1))  # (batch, seq, hidden)
        mask = ctx.mask.unsqueeze(-1)  # (batch, seq, 1)
        if self.pooling == "mean":
            g = (h * mask).sum(1) / ctx.lengths.clamp(min=1).unsqueeze(-1)  # (batch, hidden), Eq. 4
        elif self.pooling == "max":
            g = h.masked_fill(~mask, torch.finfo(h.dtype).min).max(1).values
        else:
            weights = self.score(h).masked_fill(~mask, torch.finfo(h.dtype).min).softmax(1)  # (batch, seq, 1)
            g = (weights * h).sum(1)
        g = self.dropout(g)
        ctx.publish("global", g)
        if self.placement != "encoder_input":
            return x
        return torch.cat([x, g.unsqueeze(1).expand(-1, x.shape[1], -1)], dim=-1)  # [c; w; g] per token
