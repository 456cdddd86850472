"""Deprecated import path, kept for one release: use :mod:`seqlab.evaluation.analysis`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.evaluation.analysis import (
    CHUNK_CLASSES,
    NONE,
    ChunkingTyping,
    PartAnalysis,
    analyze,
    chunk_and_type,
    format_analysis,
    zeroed_for,
)

__all__ = [
    "CHUNK_CLASSES",
    "NONE",
    "ChunkingTyping",
    "PartAnalysis",
    "analyze",
    "chunk_and_type",
    "format_analysis",
    "zeroed_for",
]
