"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.parallel` (and :mod:`seqlab.data.readers`)."""

from seqlab.data.readers import chunked
from seqlab.serving.parallel import PredictOptions, render_chunk, tag_in_processes

__all__ = ["PredictOptions", "chunked", "render_chunk", "tag_in_processes"]
