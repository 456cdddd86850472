"""Deprecated import path, kept for one release: use :mod:`seqlab.evaluation.metrics`."""

from seqlab.evaluation.metrics import (
    Scores,
    TypeScore,
    format_report,
    format_span_analysis,
    score_file,
    span_f1,
    token_accuracy,
    token_scores,
)

__all__ = [
    "Scores",
    "TypeScore",
    "format_report",
    "format_span_analysis",
    "score_file",
    "span_f1",
    "token_accuracy",
    "token_scores",
]
