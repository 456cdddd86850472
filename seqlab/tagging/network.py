"""The network: featurizer embeddings -> encoder layers -> decoder, in one forward pass."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from seqlab.config import ModelConfig
from seqlab.crf.crf import TagPath
from seqlab.data.batching import Batch
from seqlab.decoders.base import Decoded, TagSet
from seqlab.errors import SeqlabError
from seqlab.features.base import Featurizer
from seqlab.features.embedder import Embedder
from seqlab.nn.context import Context


@dataclass
class NetOutput:
    """What one forward pass gives.

    ``features`` (batch, seq_len, dim): the last encoder layer's output, the decoder's input.
    ``published``: tensors the layers published, by qualified name (``encoders.2.attention``).
    ``decoded``: best tags (batch, seq_len) and their scores (batch,).
    ``nbest``: per sentence, the k best paths when asked for, else None."""

    features: Tensor
    published: dict[str, Tensor]
    decoded: Decoded
    nbest: list[list[TagPath]] | None = None


class TaggerNet(nn.Module):
    """All trainable parts of a tagger, built from a :class:`ModelConfig`, the fitted featurizers and
    the tag set."""

    def __init__(self, config: ModelConfig, featurizers: Mapping[str, Featurizer], tags: TagSet):
        super().__init__()
        self.embedder = Embedder({name: f.module() for name, f in featurizers.items()}, config.embedder.dropout)
        layers, dim, published = [], self.embedder.output_dim, config.embedder.published_sizes()
        for layer_config in config.encoders:
            layer = layer_config.build_in(dim, published)
            published.update(layer_config.published_sizes(dim))
            layers.append(layer)
            dim = layer.output_dim
        self.encoders = nn.ModuleList(layers)
        self.decoder = config.decoder.build(dim, tags, published)

    def column_names(self) -> dict[str, int]:
        """Named column ranges of the encoder outputs that ``ablate`` can zero: name -> layer index."""
        return {name: i for i, layer in enumerate(self.encoders) for name in layer.columns}

    def encode(self, batch: Batch, ablate: Collection[str] = ()) -> tuple[Tensor, Context]:
        """Embedder and encoder layers: (features (batch, seq_len, dim), the context they filled).
        ``ablate`` names column ranges published by layers (``columns``) to zero after their layer."""
        ctx = Context(batch.mask, batch.lengths, batch.features)
        x = self.embedder(ctx)  # (batch, seq, embed_dim)
        for i, layer in enumerate(self.encoders):
            ctx.scope = f"encoders.{i}."
            x = layer(x, ctx)  # (batch, seq, layer.output_dim)
            if ablate and layer.columns:
                x = _zero_columns(x, [layer.columns[n] for n in ablate if n in layer.columns])
        ctx.scope = "decoder."
        return x, ctx

    def loss(self, batch: Batch) -> Tensor:
        """Per-sentence loss, shape (batch,)."""
        assert batch.tags is not None
        x, ctx = self.encode(batch)
        return self.decoder.loss(x, batch.tags, batch.mask, ctx)

    def forward(self, batch: Batch, ablate: Collection[str] = (), nbest: int = 0) -> NetOutput:
        """Features, published tensors, best tags and (``nbest`` > 0) the k best paths, in one pass."""
        if ablate:
            unknown = sorted(set(ablate) - set(self.column_names()))
            if unknown:
                known = ", ".join(self.column_names()) or "none"
                raise SeqlabError(f"cannot ablate {', '.join(unknown)}: this model's named parts are {known}")
        x, ctx = self.encode(batch, ablate)
        return self.head(x, batch.mask, ctx, nbest)

    def head(self, x: Tensor, mask: Tensor, ctx: Context, nbest: int = 0) -> NetOutput:
        """The decoder's part of :meth:`forward`, on features (batch, seq_len, dim) computed by the
        encoder layers here or by an inference engine (:mod:`seqlab.runtime.engine`)."""
        decoded = self.decoder.decode(x, mask, ctx)
        paths = self.decoder.nbest(x, mask, ctx, nbest) if nbest else None
        return NetOutput(x, ctx.published, decoded, paths)


def _zero_columns(x: Tensor, ranges: list[tuple[int, int]]) -> Tensor:
    keep = torch.ones(x.shape[-1], dtype=x.dtype, device=x.device)
    for start, end in ranges:
        keep[start:end] = 0
    return x * keep  # (batch, seq, dim)
