"""Deprecated import path, kept for one release: use :mod:`seqlab.crf.partition` (and :mod:`seqlab.crf.host`). A
module-level setting is read where it lives now: set it there, not here."""

from seqlab.crf.host import log_product
from seqlab.crf.partition import (
    CPU_COMPILED,
    CPU_NUMPY,
    CPU_SCALED,
    GPU_ON_HOST,
    PAIR_BLOCK,
    LogPartition,
    alpha_recursion,
    beta_recursion,
    on_host,
)

__all__ = [
    "CPU_COMPILED",
    "CPU_NUMPY",
    "CPU_SCALED",
    "GPU_ON_HOST",
    "PAIR_BLOCK",
    "LogPartition",
    "alpha_recursion",
    "beta_recursion",
    "log_product",
    "on_host",
]
