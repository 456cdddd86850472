"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.lstm`."""

from seqlab.nn.lstm import BiLSTM, gather_steps, reversal_index

__all__ = ["BiLSTM", "gather_steps", "reversal_index"]
