"""Deprecated import path, kept for one release: use :mod:`seqlab.training.distributed` (and
:mod:`seqlab.training.ranks`). A module-level setting is read where it lives now: set it there, not here."""

from seqlab.training.distributed import MAX_PROCESSES, RankFailed, launch
from seqlab.training.ranks import CUDA_RNG_PREFIX, RNG_PREFIX, DataParallelLoss, Ranks, Shard

__all__ = [
    "CUDA_RNG_PREFIX",
    "MAX_PROCESSES",
    "RNG_PREFIX",
    "DataParallelLoss",
    "RankFailed",
    "Ranks",
    "Shard",
    "launch",
]
