"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.export` (and :mod:`seqlab.runtime.tracing`). A
module-level setting is read where it lives now: set it there, not here."""

from seqlab.runtime.tracing import MAX_SPAN, EncoderNet
from seqlab.serving.export import (
    EXPORTERS,
    EmissionNet,
    ExportedTagger,
    OnnxTagger,
    TorchScriptTagger,
    export_onnx,
    export_torchscript,
)

__all__ = [
    "EXPORTERS",
    "MAX_SPAN",
    "EmissionNet",
    "EncoderNet",
    "ExportedTagger",
    "OnnxTagger",
    "TorchScriptTagger",
    "export_onnx",
    "export_torchscript",
]
