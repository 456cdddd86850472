"""Deprecated import path, kept for one release: use :mod:`seqlab.crf.compiled`."""

from seqlab.crf.compiled import CompiledPartition, kernels

__all__ = ["CompiledPartition", "kernels"]
