"""Deprecated import path, kept for one release: use :mod:`seqlab.tagging.modelfile`. A module-level setting is read
where it lives now: set it there, not here."""

from seqlab.tagging.modelfile import (
    DTYPES,
    FORMAT_VERSION,
    HEADER_BYTES,
    HEADER_BYTES_PER_TENSOR,
    MAX_BYTES,
    MAX_PARAMETER_BYTES,
    NAMES,
    SUPPORTED_VERSIONS,
    WEIGHTS,
    ModelFiles,
    ModelSource,
    Shapes,
    check_parameters,
    check_weights,
    migrate_v1,
    parse_model_files,
    read_model_files,
    read_weights,
)

__all__ = [
    "DTYPES",
    "FORMAT_VERSION",
    "HEADER_BYTES",
    "HEADER_BYTES_PER_TENSOR",
    "MAX_BYTES",
    "MAX_PARAMETER_BYTES",
    "NAMES",
    "SUPPORTED_VERSIONS",
    "WEIGHTS",
    "ModelFiles",
    "ModelSource",
    "Shapes",
    "check_parameters",
    "check_weights",
    "migrate_v1",
    "parse_model_files",
    "read_model_files",
    "read_weights",
]
