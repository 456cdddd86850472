"""Deprecated import path, kept for one release: use :mod:`seqlab.serving.serve` (and :mod:`seqlab.serving.app`). A
module-level setting is read where it lives now: set it there, not here."""

from seqlab.serving.app import (
    ENV_DEVICE,
    ENV_ENGINE,
    ENV_LIMITS,
    ENV_MAX_BATCH,
    ENV_MAX_WAIT_MS,
    ENV_MODEL,
    ENV_THREADS,
    BodyLimit,
    Limits,
    PredictRequest,
    app_from_env,
    create_app,
    http_stack,
)
from seqlab.serving.serve import run_server

__all__ = [
    "ENV_DEVICE",
    "ENV_ENGINE",
    "ENV_LIMITS",
    "ENV_MAX_BATCH",
    "ENV_MAX_WAIT_MS",
    "ENV_MODEL",
    "ENV_THREADS",
    "BodyLimit",
    "Limits",
    "PredictRequest",
    "app_from_env",
    "create_app",
    "http_stack",
    "run_server",
]
