"""Decoders: encoder features -> loss and tag predictions. Built-in families register on import."""

from seqlab.decoders.base import (
    DECODERS,
    Confidence,
    Decoded,
    Decoder,
    DecoderConfig,
    NoExactConfidence,
    NoExactNBest,
    TagSet,
)
from seqlab.decoders.crf import CRFDecoder, CRFDecoderConfig
from seqlab.decoders.gcdt import LabelDTConfig, LabelDTDecoder
from seqlab.decoders.softmax import SoftmaxDecoder, SoftmaxDecoderConfig

__all__ = [
    "DECODERS",
    "CRFDecoder",
    "CRFDecoderConfig",
    "Confidence",
    "Decoded",
    "Decoder",
    "DecoderConfig",
    "LabelDTConfig",
    "LabelDTDecoder",
    "NoExactConfidence",
    "NoExactNBest",
    "SoftmaxDecoder",
    "SoftmaxDecoderConfig",
    "TagSet",
]
