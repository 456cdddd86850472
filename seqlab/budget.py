"""Deprecated import path, kept for one release: use :mod:`seqlab.training.budget` (and :mod:`seqlab.config`). A
module-level setting is read where it lives now: set it there, not here."""

from seqlab.config import MAX_BUDGET_S, parse_duration
from seqlab.training.budget import Costs, Plan, RunClock

__all__ = ["MAX_BUDGET_S", "Costs", "Plan", "RunClock", "parse_duration"]
