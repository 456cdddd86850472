"""Deprecated import path, kept for one release: use :mod:`seqlab.evaluation.calibration`.
A module-level setting is read where it lives now: set it there, not here."""

from seqlab.evaluation.calibration import (
    Bin,
    CalibrationError,
    GOLDEN,
    HIGHEST,
    LOWEST,
    Likelihood,
    Reliability,
    TemperatureFit,
    expected_calibration_error,
    fit_temperature,
    reliability,
)

__all__ = [
    "Bin",
    "CalibrationError",
    "GOLDEN",
    "HIGHEST",
    "LOWEST",
    "Likelihood",
    "Reliability",
    "TemperatureFit",
    "expected_calibration_error",
    "fit_temperature",
    "reliability",
]
