"""Linear projection to tag scores + a linear-chain CRF (likelihood, Viterbi, exact n-best)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from torch import Tensor, nn

from seqlab.crf.crf import CRF, TagPath
from seqlab.decoders.base import DECODERS, Confidence, Decoded, Decoder, ProbabilisticDecoderConfig, TagSet
from seqlab.nn.context import Context


@DECODERS.register
class CRFDecoderConfig(ProbabilisticDecoderConfig):
    type: Literal["crf"] = "crf"
    constrained: bool = Field(True, description="forbid transitions invalid in the training scheme")

    def build(self, input_dim: int, tags: TagSet, published: dict[str, int]) -> CRFDecoder:
        constraints = tags.constraints() if self.constrained else None
        decoder = CRFDecoder(input_dim, len(tags), *(constraints or ()))
        decoder.temperature = self.temperature
        return decoder


class CRFDecoder(Decoder):
    def __init__(
        self,
        input_dim: int,
        num_tags: int,
        allowed: Tensor | None = None,
        allowed_start: Tensor | None = None,
        allowed_end: Tensor | None = None,
    ):
        super().__init__()
        self.proj = nn.Linear(input_dim, num_tags)
        nn.init.xavier_uniform_(self.proj.weight)
        nn.init.zeros_(self.proj.bias)
        self.crf = CRF(num_tags, allowed, allowed_start, allowed_end)

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        """Per-sentence negative log-likelihood, shape (batch,)."""
        return self.crf.nll(self.proj(features), tags, mask)

    def decode(self, features: Tensor, mask: Tensor, ctx: Context) -> Decoded:
        # the batch's mask is well formed: the CRF's own checks (for callers of its public API) are skipped
        tags, scores = self.crf.best_paths(self.proj(features), mask)  # (batch, seq), (batch,)
        return Decoded(tags, scores)

    def nbest(self, features: Tensor, mask: Tensor, ctx: Context, k: int) -> list[list[TagPath]]:
        return self.crf.nbest(self.proj(features), mask, k)

    def marginals(self, features: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        return self.crf.marginals(self.proj(features), mask, self.temperature)

    def confidence(
        self, features: Tensor, mask: Tensor, ctx: Context, tags: Tensor, segments: list[list[tuple[int, int]]]
    ) -> Confidence:
        """Forward-backward marginals of the path's tags, and of each span's tag sequence."""
        tokens, spans = self.crf.path_confidence(self.proj(features), mask, tags, segments, self.temperature)
        return Confidence(tokens, spans, "crf-marginal")

    def scaled_nll(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context, temperature: float) -> Tensor:
        return self.crf.nll(self.proj(features), tags, mask, temperature)
