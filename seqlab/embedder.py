"""Deprecated import path, kept for one release: use :mod:`seqlab.features.embedder`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.features.embedder import RESERVED, Embedder

__all__ = ["RESERVED", "Embedder"]
