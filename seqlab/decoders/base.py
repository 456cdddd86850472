"""The decoder contract: encoder features -> a per-sentence loss, and predictions.

A decoder is built from its config with the input size and the tag set. ``loss`` may use the gold
tags beyond scoring them (teacher forcing); ``decode`` returns a :class:`Decoded`; ``nbest`` returns
:class:`~seqlab.crf.crf.TagPath` lists and raises :class:`NoExactNBest` when the decoder cannot give an
exact k-best, instead of quietly returning fewer paths. ``marginals`` (per-token tag probabilities)
is optional.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from pydantic import Field
from torch import Tensor, nn

from seqlab.crf.crf import TagPath
from seqlab.data.schemes import allowed_transitions
from seqlab.errors import SeqlabError
from seqlab.nn.context import Context
from seqlab.registry import LayerConfig, Registry

DECODERS: Registry = Registry("decoder")


@dataclass(frozen=True)
class TagSet:
    """The labels a decoder predicts (training scheme) and that scheme ("none" for plain labels)."""

    labels: list[str]
    scheme: str

    def __len__(self) -> int:
        return len(self.labels)

    def constraints(self) -> tuple[Tensor, Tensor, Tensor] | None:
        """(allowed[from, to], allowed_start, allowed_end) bool tensors of the scheme, or None."""
        if self.scheme == "none":
            return None
        allowed, start, end = allowed_transitions(self.labels, self.scheme)
        return torch.tensor(allowed), torch.tensor(start), torch.tensor(end)


@dataclass
class Decoded:
    """Best paths of a batch.

    ``tags`` (batch, seq_len) long, 0 on padding. ``scores`` (batch,) is the decoder's score of each
    path: for the CRF the unnormalised path score, for the softmax decoder the sum of the tokens'
    log-probabilities; n-best scores are on the same scale."""

    tags: Tensor
    scores: Tensor


class NoExactNBest(SeqlabError):
    """The decoder cannot enumerate its k best paths exactly."""


class NoExactConfidence(SeqlabError):
    """The decoder has no exact probabilities for tokens and spans."""


@dataclass
class Confidence:
    """Posterior probabilities of a decoded path: ``tokens[i][t]`` = p(y_t = the path's tag at t | x), and
    ``spans[i][k]`` = p(y_a .. y_{b-1} = the path's tags there | x) for the k-th segment (a, b) asked for.
    ``kind`` says what they are (e.g. "crf-marginal")."""

    tokens: list[list[float]]
    spans: list[list[float]]
    kind: str


class DecoderConfig(LayerConfig):
    """Base of decoder configs: a ``type`` literal, ``check`` and ``build``."""

    def check(self, input_dim: int, published: dict[str, int]) -> None:
        """Raise :class:`~seqlab.registry.ConfigCheckError` if the decoder cannot take this input size, or
        needs a tensor the encoder layers do not publish (``published``: name -> last dimension)."""

    def build(self, input_dim: int, tags: TagSet, published: dict[str, int]) -> Decoder:
        raise NotImplementedError


class ProbabilisticDecoderConfig(DecoderConfig):
    """A decoder with exact probabilities, and the temperature that scales them."""

    temperature: float = Field(
        1.0,
        ge=0.01,
        le=100.0,
        description="every score is divided by it for confidences and marginals, never "
        "for the tags; 1 = as trained; 'seqlab calibrate' fits it on "
        "held-out data",
    )


class Decoder(nn.Module):
    #: Divides the scores behind :meth:`marginals` and :meth:`confidence` (not :meth:`decode`); set from
    #: the config of decoders with exact probabilities.
    temperature: float = 1.0

    def loss(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        """Per-sentence loss (batch,) from features (batch, seq, input_dim) and gold tags (batch, seq)."""
        raise NotImplementedError

    def decode(self, features: Tensor, mask: Tensor, ctx: Context) -> Decoded:
        raise NotImplementedError

    def nbest(self, features: Tensor, mask: Tensor, ctx: Context, k: int) -> list[list[TagPath]]:
        """Up to ``k`` best paths per sentence, best first."""
        if k == 1:
            decoded = self.decode(features, mask, ctx)
            lengths = mask.sum(1).tolist()
            return [[TagPath(t[:n], s)] for t, n, s in zip(decoded.tags.tolist(), lengths, decoded.scores.tolist())]
        raise NoExactNBest(f"the {type(self).__name__} cannot give an exact {k}-best list; use nbest 1")

    def marginals(self, features: Tensor, mask: Tensor, ctx: Context) -> Tensor:
        """Per-token tag probabilities (batch, seq, num_tags), zero on padding."""
        raise SeqlabError(f"the {type(self).__name__} gives no per-token marginals")

    def confidence(
        self, features: Tensor, mask: Tensor, ctx: Context, tags: Tensor, segments: list[list[tuple[int, int]]]
    ) -> Confidence:
        """Probabilities of the decoded ``tags`` (batch, seq) per token and per segment (a, b) of each
        sentence; :class:`NoExactConfidence` when the decoder has no exact ones."""
        raise NoExactConfidence(f"the {type(self).__name__} has no exact token or span probabilities")

    def scaled_nll(self, features: Tensor, tags: Tensor, mask: Tensor, ctx: Context, temperature: float) -> Tensor:
        """Per-sentence negative log-likelihood (batch,) of gold ``tags`` when every score is divided by
        ``temperature``: what calibration minimises. :class:`NoExactConfidence` when there is none."""
        raise NoExactConfidence(f"the {type(self).__name__} has no exact probabilities to calibrate")
