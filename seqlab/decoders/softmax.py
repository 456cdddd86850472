"""Linear projection + independent softmax per token."""

from __future__ import annotations

import math
from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.crf.crf import TagPath, kbest_paths
from seqlab.decoders.base import DECODERS, Confidence, Decoded, Decoder, ProbabilisticDecoderConfig, TagSet
from seqlab.nn.context import Context


@DECODERS.register
class SoftmaxDecoderConfig(ProbabilisticDecoderConfig):
    type: Literal["softmax"] = "softmax"

    def build(self, input_dim: int, tags: TagSet, published: dict[str, int]) -> SoftmaxDecoder:
        decoder = SoftmaxDecoder(input_dim, len(tags))
        decoder.temperature = self.temperature
        return decoder


class SoftmaxDecoder(Decoder):
    def __init__(self, input_dim: int, num_tags: int):
        super().__init__()
        self.proj = nn.Linear(input_dim, num_tags)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        return self.scaled_nll(features, tags, mask, ctx, 1.0)

    def scaled_nll(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context, temperature: float) -> Tensor:
        logits = self.proj(features)  # (batch, seq, tags)
        if temperature != 1.0:
            logits = logits / temperature
        token_nll = F.cross_entropy(logits.transpose(1, 2), tags, reduction="none")  # (batch, seq)
        return (token_nll * mask).sum(1)

    def decode(self, features: Tensor, mask: Tensor, ctx: Context) -> Decoded:
        logp = self.proj(features).log_softmax(-1)  # (batch, seq, tags)
        best = logp.max(-1)  # (batch, seq) values and indices
        return Decoded(best.indices.masked_fill(~mask, 0), (best.values * mask).sum(1))

    def nbest(self, features: Tensor, mask: Tensor, ctx: Context, k: int) -> list[list[TagPath]]:
        """Exact: independent decisions are a chain with zero transition scores, so the k-best
        Viterbi over the log-probabilities enumerates the k most probable label sequences."""
        logp = self.proj(features).log_softmax(-1)  # (batch, seq, tags)
        zeros = logp.new_zeros(logp.shape[-1])
        return kbest_paths(logp, mask, k, zeros[:, None].expand(-1, logp.shape[-1]), zeros, zeros)

    def marginals(self, features: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        return (self.proj(features) / self.temperature).softmax(-1) * mask.unsqueeze(-1)

    def confidence(
        self, features: Tensor, mask: Tensor, ctx: Context, tags: Tensor, segments: list[list[tuple[int, int]]]
    ) -> Confidence:
        """Exact: tokens are independent given x, so a span's probability is the product of its tokens'."""
        probs = self.marginals(features, mask, ctx).gather(2, tags.unsqueeze(2)).squeeze(2)  # (batch, seq)
        lengths = mask.sum(1).tolist()
        rows = [row[:n] for row, n in zip(probs.tolist(), lengths)]
        spans = [[math.prod(row[a:b]) for a, b in segs] for row, segs in zip(rows, segments)]
        return Confidence(rows, spans, "softmax-marginal")
