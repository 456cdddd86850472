"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.rows`. A module-level setting is read where it
lives now: set it there, not here."""

from seqlab.nn.rows import MIN_DECAY, WINDOW, LazyRows, attach, detach, flush, lookup, mark, marked, table

__all__ = ["MIN_DECAY", "WINDOW", "LazyRows", "attach", "detach", "flush", "lookup", "mark", "marked", "table"]
