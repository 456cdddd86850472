"""Deprecated import path, kept for one release: use :mod:`seqlab.runtime.heap`."""

from seqlab.runtime.heap import freeze_loaded

__all__ = ["freeze_loaded"]
