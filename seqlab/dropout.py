"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.dropout`."""

from seqlab.nn.dropout import Dropout

__all__ = ["Dropout"]
