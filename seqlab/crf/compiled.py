"""The CRF's training recursions compiled to machine code (Numba), one loop nest per batch row.

:class:`seqlab.crf.host.ScaledPartition` runs the probability-space recursions as NumPy calls, a matrix
product and three element-wise calls per time step forward and as many backward: at a chunker's sizes (ten
sentences, 40 tags) each call does little more arithmetic than it costs to dispatch, and a batch-10 training step
spent 0.5-0.9 ms there. :class:`CompiledPartition` computes the same quantities (same float64 formulas, Rabiner's
scaling, the same underflow test) in two compiled kernels, a row at a time: about 2.5 times faster, equal to
:class:`ScaledPartition` to float64 rounding (tests/test_crf.py). Where Numba is not installed or cannot compile,
:func:`kernels` returns None and the NumPy classes run instead.

Shapes: emissions (batch, seq_len, tags) float32 or float64, any strides; trans (from, to), start, end (tags,)
float64 with constraint penalties added; lengths (batch,) int64, each at least 1 (masks are left-aligned).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from seqlab.crf.host import NumpyPartition, Underflow
from seqlab.runtime.blas import one_blas_thread

_log = logging.getLogger(__name__)

_KERNELS: tuple | bool | None = False  # False: not tried yet; None: Numba missing or failed; else (forward, backward)


def _forward(probs, tops, exp_trans_t, start_probs, end_probs, lengths, alphas, sums, log_z):  # pragma: no cover
    """alphas[b, t] (scaled to sum 1), sums[b, t] (the scale factors) and log Z less the potentials' shifts,
    log_z[b], for every row, from probs[b, t] = exp(emissions[b, t] - tops[b, t]) with tops[b, t] their maximum;
    False where a value that must be positive underflowed. exp_trans_t[j, i] = exp(trans[i, j] - max trans)."""
    batch, _, num_tags = probs.shape
    for b in range(batch):
        n = lengths[b]
        log_sums = 0.0
        for t in range(n):
            s = 0.0
            for j in range(num_tags):
                if t == 0:
                    x = start_probs[j]
                else:
                    x = 0.0  # (a_{t-1} @ E)[j], a dot product over a contiguous row of E's transpose
                    for i in range(num_tags):
                        x += alphas[b, t - 1, i] * exp_trans_t[j, i]
                x *= probs[b, t, j]
                alphas[b, t, j] = x
                s += x
            if not (0.0 < s < math.inf):
                return False
            for j in range(num_tags):
                alphas[b, t, j] /= s
            sums[b, t] = s
            log_sums += math.log(s) + tops[b, t]
        final = 0.0
        for j in range(num_tags):
            final += alphas[b, n - 1, j] * end_probs[j]
        if not final > 0.0:
            return False
        log_z[b] = log_sums + math.log(final)
    return True


def _backward(
    grad, exp_trans, end_probs, lengths, alphas, probs, sums, g_em, pairs, g_start, g_end
):  # pragma: no cover
    """The gradients of sum_b grad[b] log Z_b: g_em (batch, seq_len, tags; 0 on padding), g_start, g_end and pairs
    (from, to), the pair marginals divided by exp_trans (zeroed by the caller), from the beta recursion scaled like
    the alphas; False where a marginal's normaliser underflowed. exp_trans[i, j] = exp(trans[i, j] - max trans)."""
    batch, seq_len, num_tags = alphas.shape
    betas = np.empty((seq_len, num_tags))  # one row's
    v = np.empty(num_tags)
    y = np.empty(num_tags)
    for b in range(batch):
        n = lengths[b]
        betas[n - 1] = end_probs
        for t in range(n - 2, -1, -1):
            for j in range(num_tags):
                v[j] = probs[b, t + 1, j] * betas[t + 1, j]
            s = 0.0
            for i in range(num_tags):
                x = 0.0  # (E @ v)[i], a dot product over a contiguous row of E
                for j in range(num_tags):
                    x += exp_trans[i, j] * v[j]
                betas[t, i] = x
                s += x
            for i in range(num_tags):
                betas[t, i] /= s
        for t in range(n):
            norm = 0.0
            for j in range(num_tags):
                norm += alphas[b, t, j] * betas[t, j]
            if not (0.0 < norm < math.inf):
                return False
            w = grad[b] / norm
            for j in range(num_tags):
                g_em[b, t, j] = alphas[b, t, j] * betas[t, j] * w
            if t > 0:
                ws = w / sums[b, t]
                for j in range(num_tags):
                    y[j] = probs[b, t, j] * betas[t, j] * ws
                for i in range(num_tags):
                    a = alphas[b, t - 1, i]
                    for j in range(num_tags):
                        pairs[i, j] += a * y[j]
        g_em[b, n:] = 0.0
        for j in range(num_tags):
            g_start[j] += g_em[b, 0, j]
            g_end[j] += g_em[b, n - 1, j]
    return True


def _compile(numba, signatures, function):
    """``function`` compiled for ``signatures``, cached on disk where Numba finds a writable place (the package
    folder, else the user's cache folder), else compiled in memory. Numpy's error model: a division by 0 gives inf
    or NaN (which the tests on the sums catch) rather than an exception, so the loops carry no check for it. Sums
    may be reassociated (reductions in vector lanes: other roundings, about 1e-16 relative), with no other fast-math
    assumption, so the tests for NaN and infinity still hold."""
    options = dict(nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})
    try:
        return numba.njit(signatures, cache=True, **options)(function)
    except RuntimeError as error:  # "cannot cache function ...: no locator available"
        _log.debug("numba cannot cache %s (%s): compiled in memory", function.__name__, error)
        return numba.njit(signatures, **options)(function)


def kernels() -> tuple | None:
    """(forward, backward), compiled on first use (float64 arrays; the emissions' exponentials are made in NumPy);
    None where Numba is missing or fails to compile."""
    global _KERNELS
    if _KERNELS is False:
        _KERNELS = None
        try:
            import numba
        except ImportError:
            _log.debug("numba not installed: the CRF's recursions run as NumPy calls")
            return None
        f64, i64, b1 = numba.float64, numba.int64, numba.boolean
        c1, c2, c3 = f64[::1], f64[:, ::1], f64[:, :, ::1]  # C-contiguous, so that the inner loops vectorise
        try:
            forward = _compile(numba, [b1(c3, c2, c2, c1, c1, i64[::1], c3, c2, c1)], _forward)
            backward = _compile(numba, [b1(c1, c2, c1, i64[::1], c3, c3, c2, c3, c2, c1, c1)], _backward)
        except Exception as error:
            _log.warning("the CRF's compiled recursions are unavailable (%s); NumPy runs them", error)
            return None
        _KERNELS = (forward, backward)
    return _KERNELS


class CompiledPartition:
    """log Z (``log_z``, (batch,) float64) and :meth:`gradients`, as :class:`seqlab.crf.host.ScaledPartition`,
    by the compiled kernels. Raises :class:`seqlab.crf.host.Underflow` where the forward recursion underflows;
    a gradient whose marginals underflow comes from the log-space recursions."""

    uses_blas = False  # loops of its own; only the rare log-space fallback enters NumPy's BLAS, on one thread

    def __init__(self, emissions, trans, start, end, mask):
        self.inputs = (emissions, trans, start, end, mask)
        batch, seq_len, num_tags = emissions.shape
        trans, start, end = (np.asarray(x, dtype=np.float64) for x in (trans, start, end))
        c = trans.max()
        self.exp_trans = np.exp(trans - c)  # (from, to); disallowed moves exactly 0
        self.end_probs = np.exp(end - end.max())  # (tags,)
        self.lengths = mask.sum(1, dtype=np.int64)  # (batch,)
        em = emissions.astype(np.float64, order="C")  # (batch, seq_len, tags)
        tops = em.max(axis=2)  # (batch, seq_len)
        em -= tops[:, :, None]
        self.probs = np.exp(em, out=em)  # NumPy's vectorised exp: a scalar one per element costs more
        self.alphas = np.empty((batch, seq_len, num_tags))
        self.sums = np.empty((batch, seq_len))
        self.log_z = np.empty(batch)
        forward, _ = kernels()
        if not forward(
            self.probs,
            tops,
            np.ascontiguousarray(self.exp_trans.T),
            np.exp(start - start.max()),
            self.end_probs,
            self.lengths,
            self.alphas,
            self.sums,
            self.log_z,
        ):
            raise Underflow
        self.log_z += (self.lengths - 1) * c + start.max() + end.max()  # the potentials' shifts

    def gradients(self, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        """d(sum_b grad_b log Z_b) / d(emissions, trans, start, end): float64 arrays."""
        num_tags = self.exp_trans.shape[0]
        g_em = np.empty_like(self.alphas)
        pairs, g_start, g_end = np.zeros((num_tags, num_tags)), np.zeros(num_tags), np.zeros(num_tags)
        _, backward = kernels()
        grad = np.ascontiguousarray(grad, dtype=np.float64)
        if not backward(
            grad,
            self.exp_trans,
            self.end_probs,
            self.lengths,
            self.alphas,
            self.probs,
            self.sums,
            g_em,
            pairs,
            g_start,
            g_end,
        ):
            with one_blas_thread():
                return NumpyPartition(*self.inputs).gradients(grad)
        return g_em, pairs * self.exp_trans, g_start, g_end
