"""Deprecated import path, kept for one release: use :mod:`seqlab.evaluation.plotting`."""

from seqlab.evaluation.plotting import plot_attention, plot_curves

__all__ = ["plot_attention", "plot_curves"]
