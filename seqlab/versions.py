"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.versions`."""

from seqlab.nn.versions import weights_key

__all__ = ["weights_key"]
