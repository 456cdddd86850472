"""The network: embedder -> encoder layers -> decoder."""

from __future__ import annotations

from torch import Tensor, nn

from seqlab.config import CRFDecoderConfig, ModelConfig
from seqlab.data.batching import Batch
from seqlab.data.vocab import CASING_CLASSES
from seqlab.decoders import CRFDecoder, SoftmaxDecoder
from seqlab.embedder import Embedder


class TaggerNet(nn.Module):
    """All trainable parts of a tagger, built from a :class:`ModelConfig` and vocabulary sizes."""

    def __init__(self, config: ModelConfig, num_words: int, num_chars: int, num_tags: int,
                 pretrained: Tensor | None = None, constraints: tuple[Tensor, Tensor, Tensor] | None = None):
        super().__init__()
        e = config.embedder
        self.embedder = Embedder(num_words, e.word.dim, num_chars, e.char.type, e.char.dim, e.char.hidden,
                                 e.char.kernel, e.casing_dim, len(CASING_CLASSES), e.dropout,
                                 pretrained, e.word.freeze)
        layers, dim = [], self.embedder.output_dim
        for layer_config in config.encoders:
            layer = layer_config.build(dim)
            layers.append(layer)
            dim = layer.output_dim
        self.encoders = nn.ModuleList(layers)
        if isinstance(config.decoder, CRFDecoderConfig):
            use = constraints if config.decoder.constrained else None
            self.decoder: CRFDecoder | SoftmaxDecoder = CRFDecoder(dim, num_tags, *(use or ()))
        else:
            self.decoder = SoftmaxDecoder(dim, num_tags)

    def features(self, batch: Batch) -> Tensor:
        """(batch, seq_len, encoder_output_dim)"""
        x = self.embedder(batch)
        for layer in self.encoders:
            x = layer(x, batch.mask)
        return x

    def loss(self, batch: Batch) -> Tensor:
        """Per-sentence loss, shape (batch,)."""
        assert batch.tags is not None
        return self.decoder.loss(self.features(batch), batch.tags, batch.mask)

    def decode(self, batch: Batch) -> Tensor:
        """(batch, seq_len) tag indices."""
        return self.decoder.decode(self.features(batch), batch.mask)

    def explain(self, batch: Batch) -> tuple[Tensor, list[dict[str, Tensor]]]:
        """Decoded tags and, per encoder layer that can explain itself, its tensors (e.g. attention)."""
        x = self.embedder(batch)
        info = []
        for layer in self.encoders:
            if hasattr(layer, "explain"):
                x, details = layer.explain(x, batch.mask)
                info.append(details)
            else:
                x = layer(x, batch.mask)
                info.append({})
        return self.decoder.decode(x, batch.mask), info
