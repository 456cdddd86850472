"""Deprecated import path, kept for one release: use :mod:`seqlab.crf.viterbi`. A module-level setting is read where it
lives now: set it there, not here."""

from seqlab.crf.viterbi import MAX_ONLY_FROM, TORCH_ADD_FROM, viterbi

__all__ = ["MAX_ONLY_FROM", "TORCH_ADD_FROM", "viterbi"]
