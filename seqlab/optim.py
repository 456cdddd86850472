"""Deprecated import path, kept for one release: use :mod:`seqlab.training.optim`. A module-level setting is read where
it lives now: set it there, not here."""

from seqlab.training.optim import FUSED_NADAM, SGD, NAdam

__all__ = ["FUSED_NADAM", "SGD", "NAdam"]
