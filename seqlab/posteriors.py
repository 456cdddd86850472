"""The CRF's forward-backward recursions in NumPy (float64), for confidences at CPU inference.

Like the Viterbi of :mod:`seqlab.viterbi`, a recursion is a loop over time steps of small array operations,
whose cost in PyTorch is its per-call dispatch: on 2 cores, one 24-token sentence with 23 tags took about
1 ms per recursion as PyTorch float32 ops. Here each step is a few NumPy operations in float64 (a shifted matrix product, as in
:class:`seqlab.crf_partition._NumpyPartition`): the matrix product's rounding may depend on how many rows it
has, but in float64 that is ~1e-16, so confidences are the same at any batch size to far below what is
reported (in float32 the differences reached 1e-5). :meth:`seqlab.crf.CRF._forward_backward` uses this without gradients on CPU; the
PyTorch recursions (:mod:`seqlab.crf_partition`) remain for training and differentiable marginals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqlab.blas import one_blas_thread
from seqlab.crf_partition import log_product


@dataclass
class ForwardBackward:
    """``alphas`` (batch, seq_len, tags): log-sum of every prefix ending in tag j at t, emission at t
    included; ``betas`` (batch, seq_len, tags): log-sum of every continuation after t from tag i, its
    emissions included; both keep their last real value on padding. ``log_z`` (batch,)."""

    alphas: np.ndarray
    betas: np.ndarray
    log_z: np.ndarray


@one_blas_thread()  # tiny products: NumPy's other BLAS threads would only spin against PyTorch's
def forward_backward(emissions: np.ndarray, mask: np.ndarray, trans: np.ndarray, start: np.ndarray,
                     end: np.ndarray) -> ForwardBackward:
    """``emissions`` (batch, seq_len, tags), ``mask`` (batch, seq_len) bool, left-aligned, first column
    True; ``trans`` (from, to), ``start`` and ``end`` (tags,) with the (finite) constraint penalties added.
    Computed in float64; each step's log-sum-exp over the previous tags is a matrix product in probability
    space, shifted by the row's maximum: log(exp(a - m) @ exp(trans - c)) + m + c."""
    emissions = emissions.astype(np.float64, copy=False)
    trans, start, end = (a.astype(np.float64, copy=False) for a in (trans, start, end))
    batch, seq_len, num_tags = emissions.shape
    padded = not bool(mask.all())
    c = trans.max()
    exp_trans = np.exp(trans - c)  # (from, to)
    exp_trans_t = np.ascontiguousarray(exp_trans.T)  # (to, from)
    log_trans = trans - c  # (from, to); where a product underflows (a state that only disallowed moves reach),
    # log_product takes its exact log-sum-exp instead of a floor
    alphas = np.empty((batch, seq_len, num_tags))
    alpha = start + emissions[:, 0]  # (batch, tags)
    alphas[:, 0] = alpha
    for t in range(1, seq_len):
        m = alpha.max(axis=1, keepdims=True)  # (batch, 1)
        nxt = log_product(alpha - m, log_trans, exp_trans)[1] + (m + c) + emissions[:, t]  # (batch, to)
        alpha = np.where(mask[:, t, None], nxt, alpha) if padded else nxt
        alphas[:, t] = alpha
    betas = np.empty((batch, seq_len, num_tags))
    beta = np.broadcast_to(end, (batch, num_tags))  # (batch, tags)
    betas[:, seq_len - 1] = beta
    for t in range(seq_len - 2, -1, -1):
        v = emissions[:, t + 1] + beta  # (batch, to)
        m = v.max(axis=1, keepdims=True)  # (batch, 1)
        nxt = log_product(v - m, log_trans.T, exp_trans_t)[1] + (m + c)  # (batch, from)
        beta = np.where(mask[:, t + 1, None], nxt, beta) if padded else nxt
        betas[:, t] = beta
    last = alphas[:, -1] + end  # (batch, tags): padded rows carry their last alpha
    m = last.max(axis=1, keepdims=True)
    log_z = np.log(np.exp(last - m).sum(axis=1)) + m[:, 0]  # (batch,)
    return ForwardBackward(alphas, betas, log_z)
