"""The encoder contract shared by every layer of the stack, and the encoder registry."""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from seqlab.nn.context import Context
from seqlab.registry import LayerConfig, Registry

ENCODERS: Registry = Registry("encoder")


class EncoderConfig(LayerConfig):
    """Base of encoder configs: a ``type`` literal, ``output_dim`` and ``build``.

    ``output_dim(input_dim)`` computes the layer's output size without building it, and raises
    :class:`~seqlab.registry.ConfigCheckError` (naming the field) when the layer cannot be built on
    that input size: the config is then rejected when it is read, not when the model is built."""

    def output_dim(self, input_dim: int) -> int:
        raise NotImplementedError

    def published_sizes(self, input_dim: int) -> dict[str, int]:
        """Name -> last dimension of the tensors the layer publishes that a decoder may be built on
        (a global vector); what is only for analysis (attention maps) need not be listed."""
        return {}

    def check(self, input_dim: int, published: Mapping[str, int]) -> None:
        """Raise :class:`~seqlab.registry.ConfigCheckError` when the layer needs a published tensor
        (``published``: name -> last dimension, from the features and the layers below) that is not there."""

    def build(self, input_dim: int) -> Encoder:
        raise NotImplementedError

    def build_in(self, input_dim: int, published: Mapping[str, int]) -> Encoder:
        """Build the layer within a stack; a layer that reads published tensors (a lattice encoder reading
        word embeddings) overrides this to size itself on them."""
        return self.build(input_dim)


class Encoder(nn.Module):
    """A contextual layer.

    ``forward(x, ctx)`` takes ``x`` of shape (batch, seq_len, input_dim) and a
    :class:`~seqlab.nn.context.Context` (mask, lengths, the batch's feature tensors, tensors published by
    earlier layers) and returns (batch, seq_len, output_dim). Values at padded positions of the output
    are unspecified; real positions must not depend on padding. A layer may publish tensors with
    ``ctx.publish(name, tensor)`` (attention maps, a global vector) and may name column ranges of its
    output in ``columns`` (``{"H": (0, 200), "C1": (200, 240)}``) so that analysis code can zero them
    (``TaggerNet.forward(batch, ablate=...)``) without knowing the layer.
    """

    output_dim: int
    columns: dict[str, tuple[int, int]] = {}  # noqa: RUF012 - read-only here; a layer with columns sets its own

    def forward(self, x: Tensor, ctx: Context) -> Tensor:  # pragma: no cover - interface
        raise NotImplementedError
