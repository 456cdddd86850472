"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.rows`.
A module-level setting is read where it lives now: set it there, not here."""

from seqlab.nn.rows import LazyRows, MIN_DECAY, WINDOW, attach, detach, flush, lookup, mark, marked, table

__all__ = ["LazyRows", "MIN_DECAY", "WINDOW", "attach", "detach", "flush", "lookup", "mark", "marked", "table"]
