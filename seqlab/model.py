"""Deprecated import path, kept for one release: use :mod:`seqlab.tagging.network`."""

from seqlab.tagging.network import NetOutput, TaggerNet

__all__ = ["NetOutput", "TaggerNet"]
