"""Parallel multi-head self-attention after a Bi-LSTM (Li et al. 2019, "Why attention? Analyze BiLSTM
deficiency and its remedies in the case of NER", Sections 4.1-4.2).

For each head i of m, with H (batch, n, d_h) the layer's input:

    alpha_i = softmax(H W_qi (H W_ki)^T / sqrt(d_c))      (n x n, over the keys of the sentence)
    C_i     = alpha_i H W_vi                              (n x d_c)

and the output is [H; C_1; ...; C_m], which the decoder's affine-softmax reads (Section 4.2). The paper
uses m = 5 and d_c = d_h / 5. Padded keys get no weight; rows of padded queries are zero.

The output's columns are named for analysis (Table 3): ``H`` (the input), ``C_all`` (all context
vectors) and ``C1`` .. ``Cm``; ``TaggerNet.forward(batch, ablate=...)`` zeroes any of them. The layer
publishes ``attention``: (batch, m, n, n) weights, for heat maps (Figures 2 and 3).
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.nn.context import Context
from seqlab.nn.dropout import Dropout
from seqlab.registry import ConfigCheckError


@ENCODERS.register
class ParallelAttentionConfig(EncoderConfig):
    type: Literal["parallel_attention"] = "parallel_attention"
    heads: int = Field(5, gt=0, le=64, description="m = 5 heads in the paper")
    head_size: int | None = Field(
        None, gt=0, le=4096, description="d_c; None = input size / heads, as the paper (d_c = d_h / 5)"
    )
    dropout: float = Field(0.0, ge=0.0, lt=1.0, description="dropout on the attention weights")

    def _head_size(self, input_dim: int) -> int:
        if self.head_size is not None:
            return self.head_size
        if input_dim % self.heads:
            raise ConfigCheckError(
                "heads",
                f"{self.heads} heads do not divide the input size {input_dim}; "
                f"set head_size or a head count that divides it",
            )
        return input_dim // self.heads

    def output_dim(self, input_dim: int) -> int:
        return input_dim + self.heads * self._head_size(input_dim)

    def build(self, input_dim: int) -> ParallelAttentionEncoder:
        return ParallelAttentionEncoder(input_dim, self.heads, self._head_size(input_dim), self.dropout)


class ParallelAttentionEncoder(Encoder):
    def __init__(self, input_dim: int, heads: int, head_size: int, dropout: float = 0.0):
        super().__init__()
        self.heads, self.head_size = heads, head_size
        self.qkv = nn.Linear(input_dim, 3 * heads * head_size, bias=False)  # [W_q1..W_qm | W_k.. | W_v..]
        nn.init.xavier_uniform_(self.qkv.weight)
        self.dropout = Dropout(dropout)
        self.output_dim = input_dim + heads * head_size
        self.columns = {"H": (0, input_dim), "C_all": (input_dim, self.output_dim)}
        for i in range(heads):
            start = input_dim + i * head_size
            self.columns[f"C{i + 1}"] = (start, start + head_size)

    def forward(self, x: Tensor, ctx: Context) -> Tensor:
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, self.head_size).permute(2, 0, 3, 1, 4)  # (b, m, n, dc)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_size)  # (batch, m, n, n)
        keys = ctx.mask[:, None, None, :]  # (batch, 1, 1, n)
        scores = scores.masked_fill(~keys, torch.finfo(scores.dtype).min)
        alpha = torch.softmax(scores, dim=-1) * ctx.mask[:, None, :, None]  # padded queries: zero rows
        ctx.publish("attention", alpha)
        context = self.dropout(alpha) @ v  # (batch, m, n, dc)
        context = context.transpose(1, 2).reshape(b, n, self.heads * self.head_size)  # [C_1; ...; C_m]
        return torch.cat([x, context], dim=-1)  # (batch, n, d_h + m * dc)
