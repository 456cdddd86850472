"""Encoder layers: each maps (batch, seq_len, input_dim) to (batch, seq_len, output_dim) under a context.

Every encoder family lives in its own module with its config class (a pydantic model with a ``type``
literal, ``output_dim(input_dim)`` and ``build(input_dim)``) registered with :data:`ENCODERS`; a stack
of layers is a list in the YAML file. The built-in families are imported here, unguarded: a family
that fails to import raises.
"""

from seqlab.encoders.attention import ParallelAttentionConfig, ParallelAttentionEncoder
from seqlab.encoders.base import ENCODERS, Encoder, EncoderConfig
from seqlab.encoders.bilstm import BiLSTMConfig, BiLSTMEncoder
from seqlab.encoders.flat import FlatConfig, FlatEncoder
from seqlab.encoders.gcdt import DTConfig, DTEncoder, GlobalContextConfig, GlobalContextEncoder
from seqlab.encoders.psa import PSAFusionConfig, PSAFusionEncoder, SANConfig

__all__ = [
    "ENCODERS",
    "BiLSTMConfig",
    "BiLSTMEncoder",
    "DTConfig",
    "DTEncoder",
    "Encoder",
    "EncoderConfig",
    "FlatConfig",
    "FlatEncoder",
    "GlobalContextConfig",
    "GlobalContextEncoder",
    "PSAFusionConfig",
    "PSAFusionEncoder",
    "ParallelAttentionConfig",
    "ParallelAttentionEncoder",
    "SANConfig",
]
