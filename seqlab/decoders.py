"""Decoders: features -> per-sentence loss and tag predictions.

Both project features to tag scores with one linear layer; the CRF adds transition scores and
decodes globally, the softmax decoder picks each token's best tag independently.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from seqlab.crf import CRF


class CRFDecoder(nn.Module):
    def __init__(self, input_dim: int, num_tags: int, allowed: Tensor | None = None,
                 allowed_start: Tensor | None = None, allowed_end: Tensor | None = None):
        super().__init__()
        self.proj = nn.Linear(input_dim, num_tags)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.crf = CRF(num_tags, allowed, allowed_start, allowed_end)

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        """Per-sentence negative log-likelihood, shape (batch,)."""
        return self.crf.nll(self.proj(features), tags, mask)

    def decode(self, features: Tensor, mask: Tensor) -> Tensor:
        """Best tags, (batch, seq_len) long; padding positions are 0."""
        return self.crf.viterbi_tags(self.proj(features), mask)

    def nbest(self, features: Tensor, mask: Tensor, k: int) -> list[list[tuple[list[int], float]]]:
        return self.crf.decode(self.proj(features), mask, nbest=k)

    def marginals(self, features: Tensor, mask: Tensor) -> Tensor:
        return self.crf.marginals(self.proj(features), mask)


class SoftmaxDecoder(nn.Module):
    def __init__(self, input_dim: int, num_tags: int):
        super().__init__()
        self.proj = nn.Linear(input_dim, num_tags)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        logits = self.proj(features)  # (batch, seq, tags)
        token_nll = F.cross_entropy(logits.transpose(1, 2), tags, reduction="none")  # (batch, seq)
        return (token_nll * mask).sum(1)

    def decode(self, features: Tensor, mask: Tensor) -> Tensor:
        return self.proj(features).argmax(-1).masked_fill(~mask, 0)

    def nbest(self, features: Tensor, mask: Tensor, k: int) -> list[list[tuple[list[int], float]]]:
        """Only the 1-best is exact for independent decisions; it is returned with its log-probability."""
        logp = self.proj(features).log_softmax(-1)  # (batch, seq, tags)
        best = logp.max(-1)
        out = []
        for i in range(mask.shape[0]):
            n = int(mask[i].sum())
            out.append([(best.indices[i, :n].tolist(), float(best.values[i, :n].sum()))])
        return out

    def marginals(self, features: Tensor, mask: Tensor) -> Tensor:
        return self.proj(features).softmax(-1) * mask.unsqueeze(-1)
