"""The network set up for tracing (ONNX export, TorchScript): what the onnxruntime engine
(:mod:`seqlab.runtime.engine`) and the exporters (:mod:`seqlab.serving.export`) share.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import Tensor, nn

from seqlab.data.batching import Batch
from seqlab.encoders.flat import RelativeSpanEncoding
from seqlab.errors import SeqlabError
from seqlab.nn.lstm import BiLSTM

MAX_SPAN = 4096  # longest sentence an exported FLAT model takes (its distance tables: 4 x 8193 rows)


class EncoderNet(nn.Module):
    """(mask, lengths, feature tensors...) -> (encoder output, published tensors...), in the given order of
    feature and published names: what ``seqlab.runtime.engine`` runs in onnxruntime."""

    def __init__(self, net: nn.Module, names: list[tuple[str, str]], published: list[str]):
        super().__init__()
        self.net, self.names, self.published = net, names, published
        loops = [name for name in net.embedder.names if not net.embedder.get_submodule(name).traceable]
        if loops:  # a trace would fix the loop at the sample's length
            raise SeqlabError(f"export: the feature '{loops[0]}' runs a loop over time steps, which does not export")

    def forward(self, mask: Tensor, lengths: Tensor, *tensors: Tensor) -> tuple[Tensor, ...]:
        inputs: dict[str, dict[str, Tensor]] = {}
        for (feature, name), tensor in zip(self.names, tensors):
            inputs.setdefault(feature, {})[name] = tensor
        x, ctx = self.net.encode(Batch(mask, lengths, None, [], inputs))
        return (x, *(ctx.published[name] for name in self.published))


@contextmanager
def traceable(tagger):
    """The network set up for tracing, restored afterwards: BiLSTMs on their padded path (the
    packed-sequence one does not trace; both give the same real steps), FLAT's distance tables at a
    fixed size (it sizes them from the data otherwise)."""
    lstms = [m for m in tagger.net.modules() if isinstance(m, BiLSTM)]
    spans = [m for m in tagger.net.modules() if isinstance(m, RelativeSpanEncoding)]
    saved = [m.packed_inference for m in lstms], [m.fixed_span for m in spans]
    for m in lstms:
        m.packed_inference = False
    for m in spans:
        m.fixed_span = MAX_SPAN
    try:
        with torch.no_grad():
            yield
    finally:
        for m, flag in zip(lstms, saved[0]):
            m.packed_inference = flag
        for m, span in zip(spans, saved[1]):
            m.fixed_span = span
