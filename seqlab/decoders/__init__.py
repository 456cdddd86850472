"""Decoders: encoder features -> loss and tag predictions. Built-in families register on import."""

from seqlab.decoders.base import DECODERS, Decoded, Decoder, DecoderConfig, NoExactNBest, TagSet
from seqlab.decoders.crf import CRFDecoder, CRFDecoderConfig
from seqlab.decoders.gcdt import LabelDTConfig, LabelDTDecoder
from seqlab.decoders.softmax import SoftmaxDecoder, SoftmaxDecoderConfig

__all__ = ["DECODERS", "Decoded", "Decoder", "DecoderConfig", "NoExactNBest", "TagSet", "CRFDecoder",
           "CRFDecoderConfig", "LabelDTConfig", "LabelDTDecoder", "SoftmaxDecoder", "SoftmaxDecoderConfig"]
