"""Deprecated import path, kept for one release: use :mod:`seqlab.runtime.blas`."""

from seqlab.runtime.blas import one_blas_thread

__all__ = ["one_blas_thread"]
