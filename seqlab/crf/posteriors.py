"""The CRF's forward-backward recursions in NumPy (float64), for confidences at CPU inference.

Like the Viterbi of :mod:`seqlab.crf.viterbi`, a recursion is a loop over time steps of small array operations,
whose cost in PyTorch is its per-call dispatch: on 2 cores, one 24-token sentence with 23 tags took about
1 ms per recursion as PyTorch float32 ops. Here each step is a few NumPy operations in float64 (a shifted matrix
product, as in :class:`seqlab.crf.host.NumpyPartition`): the matrix product's rounding may depend on how many rows it
has, but in float64 that is ~1e-16, so confidences are the same at any batch size to far below what is
reported (in float32 the differences reached 1e-5). :meth:`seqlab.crf.crf.CRF._forward_backward` uses this without
gradients on CPU; the PyTorch recursions (:mod:`seqlab.crf.partition`) remain for training and differentiable marginals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqlab.crf.host import NumpyPartition
from seqlab.runtime.blas import one_blas_thread


@dataclass
class ForwardBackward:
    """``alphas`` (batch, seq_len, tags): log-sum of every prefix ending in tag j at t, emission at t
    included; ``betas`` (batch, seq_len, tags): log-sum of every continuation after t from tag i, its
    emissions included; both keep their last real value on padding. ``log_z`` (batch,)."""

    alphas: np.ndarray
    betas: np.ndarray
    log_z: np.ndarray


@one_blas_thread()  # tiny products: NumPy's other BLAS threads would only spin against PyTorch's
def forward_backward(
    emissions: np.ndarray, mask: np.ndarray, trans: np.ndarray, start: np.ndarray, end: np.ndarray
) -> ForwardBackward:
    """``emissions`` (batch, seq_len, tags), ``mask`` (batch, seq_len) bool, left-aligned, first column
    True; ``trans`` (from, to), ``start`` and ``end`` (tags,) with the (finite) constraint penalties added.
    Computed in float64; each step's log-sum-exp over the previous tags is a matrix product in probability
    space, shifted by the row's maximum: log(exp(a - m) @ exp(trans - c)) + m + c."""
    recursions = NumpyPartition(emissions, trans, start, end, mask)  # the alphas and log Z of the CRF's loss
    return ForwardBackward(recursions.alphas, recursions.betas(), recursions.log_z)
