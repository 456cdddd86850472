"""Deprecated import path, kept for one release: use :mod:`seqlab.training.averaging`."""

from seqlab.training.averaging import WeightAverage

__all__ = ["WeightAverage"]
