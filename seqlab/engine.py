"""Deprecated import path, kept for one release: use :mod:`seqlab.runtime.engine`. A module-level setting is read where
it lives now: set it there, not here."""

from seqlab.runtime.engine import (
    AUTO_ROWS,
    ENGINES,
    PAIRWISE_BUDGET,
    TOLERANCE,
    EngineRunError,
    OnnxEncoding,
    make_engine,
    refuse_off_cpu,
)

__all__ = [
    "AUTO_ROWS",
    "ENGINES",
    "PAIRWISE_BUDGET",
    "TOLERANCE",
    "EngineRunError",
    "OnnxEncoding",
    "make_engine",
    "refuse_off_cpu",
]
