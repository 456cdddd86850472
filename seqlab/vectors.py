"""Deprecated import path, kept for one release: use :mod:`seqlab.features.vectors`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.features.vectors import (
    MAX_EXTRA_BYTES,
    PACKAGED,
    VectorIndex,
    fit_vocab_and_table,
    load_vectors,
    source_of,
    vector_index,
    vector_source_present,
)

__all__ = [
    "MAX_EXTRA_BYTES",
    "PACKAGED",
    "VectorIndex",
    "fit_vocab_and_table",
    "load_vectors",
    "source_of",
    "vector_index",
    "vector_source_present",
]
