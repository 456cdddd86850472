"""Deprecated import path, kept for one release: use :mod:`seqlab.evaluation.calibration`. A module-level setting is
read where it lives now: set it there, not here."""

from seqlab.evaluation.calibration import (
    GOLDEN,
    HIGHEST,
    LOWEST,
    Bin,
    CalibrationError,
    Likelihood,
    Reliability,
    TemperatureFit,
    expected_calibration_error,
    fit_temperature,
    reliability,
)

__all__ = [
    "GOLDEN",
    "HIGHEST",
    "LOWEST",
    "Bin",
    "CalibrationError",
    "Likelihood",
    "Reliability",
    "TemperatureFit",
    "expected_calibration_error",
    "fit_temperature",
    "reliability",
]
