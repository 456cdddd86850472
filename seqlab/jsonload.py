"""Deprecated import path, kept for one release: use :mod:`seqlab.io.jsonload`. A module-level setting is read where it
lives now: set it there, not here."""

from seqlab.io.jsonload import MAX_DEPTH, NestingError, depth, loads

__all__ = ["MAX_DEPTH", "NestingError", "depth", "loads"]
