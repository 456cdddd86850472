"""Deprecated import path, kept for one release: use :mod:`seqlab.runtime.cost`. A module-level setting is read where it
lives now: set it there, not here."""

from seqlab.runtime.cost import (
    EXPLAIN_BYTES,
    FLAT_PER_HEAD,
    FLAT_PER_PAIR,
    FLOAT,
    MEMORY_BUDGET,
    META_ABOVE,
    PARALLEL_PER_HEAD,
    PSA_PER_PAIR,
    WIDTH_COPIES,
    Budget,
    Cost,
    OverBudget,
    network_cost,
    padded,
    parameter_shapes,
    state_bytes,
)

__all__ = [
    "EXPLAIN_BYTES",
    "FLAT_PER_HEAD",
    "FLAT_PER_PAIR",
    "FLOAT",
    "MEMORY_BUDGET",
    "META_ABOVE",
    "PARALLEL_PER_HEAD",
    "PSA_PER_PAIR",
    "WIDTH_COPIES",
    "Budget",
    "Cost",
    "OverBudget",
    "network_cost",
    "padded",
    "parameter_shapes",
    "state_bytes",
]
