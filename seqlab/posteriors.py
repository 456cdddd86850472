"""Deprecated import path, kept for one release: use :mod:`seqlab.crf.posteriors`."""

from seqlab.crf.posteriors import ForwardBackward, forward_backward

__all__ = ["ForwardBackward", "forward_backward"]
