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
    "Confidence",
    "Decoded",
    "NoExactConfidence",
    "Decoder",
    "DecoderConfig",
    "NoExactNBest",
    "TagSet",
    "CRFDecoder",
    "CRFDecoderConfig",
    "LabelDTConfig",
    "LabelDTDecoder",
    "SoftmaxDecoder",
    "SoftmaxDecoderConfig",
]
