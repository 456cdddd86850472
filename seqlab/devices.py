"""Deprecated import path, kept for one release: use :mod:`seqlab.runtime.devices`. A module-level setting is read where
it lives now: set it there, not here."""

from seqlab.runtime.devices import (
    SMALL_BATCH,
    deterministic_algorithms,
    one_thread_here,
    resolve_device,
    run_concurrently,
    threads_for,
)

__all__ = [
    "SMALL_BATCH",
    "deterministic_algorithms",
    "one_thread_here",
    "resolve_device",
    "run_concurrently",
    "threads_for",
]
