"""Encoder layers: each maps (batch, seq_len, input_dim) to (batch, seq_len, output_dim) under a mask.

Every encoder family lives in its own module with its config class (a pydantic model with a
``type`` literal and a ``build(input_dim)`` method). ``seqlab.config`` collects the config classes
into one discriminated union, so a stack of layers is a list in the YAML file.
"""

from seqlab.encoders.base import Encoder
from seqlab.encoders.bilstm import BiLSTMConfig, BiLSTMEncoder

__all__ = ["Encoder", "BiLSTMConfig", "BiLSTMEncoder"]
