"""Deprecated import path, kept for one release: use :mod:`seqlab.training.checkpoint`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.training.checkpoint import (
    CPU_RNG_BYTES,
    SCALAR_STATES,
    TRAINER_KEYS,
    Checkpoint,
    check_optimizer_state,
    load_checkpoint,
    optimizer_from_files,
    optimizer_to_files,
    save_checkpoint,
)

__all__ = [
    "CPU_RNG_BYTES",
    "SCALAR_STATES",
    "TRAINER_KEYS",
    "Checkpoint",
    "check_optimizer_state",
    "load_checkpoint",
    "optimizer_from_files",
    "optimizer_to_files",
    "save_checkpoint",
]
