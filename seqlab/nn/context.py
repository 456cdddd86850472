"""What a layer sees besides its input tensor, and what it may leave for later layers.

A :class:`Context` is made once per batch by the network. Encoder layers and the decoder read the
mask, the lengths and the batch's feature tensors (positions, lattice spans: whatever a featurizer
collated) from it, and may publish named tensors (attention maps, a global vector) that later
layers, the decoder and the analysis code read back. Published names are qualified by the layer
that published them (``encoders.0.attention``); :meth:`Context.latest` finds the most recent one of
a plain name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch import Tensor


@dataclass
class Context:
    mask: Tensor  # (batch, seq_len) bool, True on real tokens (the positions that get a tag)
    lengths: Tensor  # (batch,) long, real tokens per sentence
    inputs: dict[str, dict[str, Tensor]] = field(default_factory=dict)  # featurizer name -> its tensors
    published: dict[str, Tensor] = field(default_factory=dict)  # "encoders.0.attention" -> tensor
    scope: str = ""  # prefix of the names the running layer publishes, set by the network

    @classmethod
    def of(cls, mask: Tensor) -> Context:
        """A context with only a mask: for running one layer on its own (tests, notebooks)."""
        return cls(mask, mask.sum(1))

    def publish(self, name: str, tensor: Tensor) -> None:
        self.published[self.scope + name] = tensor

    def latest(self, name: str) -> Tensor | None:
        """The most recently published tensor called ``name`` (by any layer), or None."""
        suffix = "." + name
        found = None
        for key, value in self.published.items():
            if key == name or key.endswith(suffix):
                found = value
        return found
