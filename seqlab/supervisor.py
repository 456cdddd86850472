"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.supervisor`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.serving.supervisor import (
    REUSE_PORT,
    WORKER_START_TIMEOUT_RANGE,
    WORKER_START_TIMEOUT_S,
    WORKER_TIMEOUT_RANGE,
    WORKER_TIMEOUT_S,
    Watchdog,
    bound_socket,
    supervise,
)

__all__ = [
    "REUSE_PORT",
    "WORKER_START_TIMEOUT_RANGE",
    "WORKER_START_TIMEOUT_S",
    "WORKER_TIMEOUT_RANGE",
    "WORKER_TIMEOUT_S",
    "Watchdog",
    "bound_socket",
    "supervise",
]
