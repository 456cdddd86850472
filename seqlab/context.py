"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.context`."""

from seqlab.nn.context import Context

__all__ = ["Context"]
