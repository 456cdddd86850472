"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.backoff`."""

from seqlab.serving.backoff import Backoff

__all__ = ["Backoff"]
