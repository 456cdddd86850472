"""Looking at results: scores and reports, calibration, error analyses, plots."""
