"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.batcher`."""

from seqlab.serving.batcher import MicroBatcher

__all__ = ["MicroBatcher"]
