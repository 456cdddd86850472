"""Deprecated import path, kept for one release: use :mod:`seqlab.nn.dt`. A module-level setting is read where it lives
now: set it there, not here."""

from seqlab.nn.dt import DTRNN, BiDTRNN, LGRUCell, TGRUCell

__all__ = ["DTRNN", "BiDTRNN", "LGRUCell", "TGRUCell"]
