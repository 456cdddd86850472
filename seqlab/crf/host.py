"""The CRF's recursions on the host, in NumPy float64: log Z and its closed-form gradient.

:class:`NumpyPartition` runs the recursions in log space, each time step a shifted matrix product; its alphas and
betas are also the forward-backward of CPU confidences (:mod:`seqlab.crf.posteriors`). :class:`ScaledPartition`
runs them in probability space (Rabiner's scaling), about half the NumPy calls, and raises :class:`Underflow` where
a sentence's probabilities underflow float64 (:meth:`ScaledPartition.or_log_space` then falls back to
:class:`NumpyPartition`). :mod:`seqlab.crf.compiled` computes the scaled recursions compiled;
:mod:`seqlab.crf.partition` chooses among the three. Inputs as :class:`seqlab.crf.partition.LogPartition`'s, as NumPy
arrays.
"""

from __future__ import annotations

import numpy as np


def log_product(x: np.ndarray, log_mat: np.ndarray, exp_mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """exp(x) @ exp_mat and its log, for rows x (batch, n) shifted to a maximum of 0 and exp_mat = exp(log_mat)
    (n, m). Where the product underflowed to 0 (every term below float64's range: moves penalised as disallowed
    into a tag whose emission is huge), its log is the exact log-sum-exp over (batch, n, m) rather than a floor,
    so such a state stays as unlikely as its penalties make it."""
    summed = np.exp(x) @ exp_mat  # (batch, m)
    if summed.min() > 0:
        return summed, np.log(summed)
    with np.errstate(divide="ignore"):
        terms = x[:, :, None] + log_mat[None]  # (batch, n, m)
        top = terms.max(axis=1)  # (batch, m)
        exact = np.log(np.exp(terms - top[:, None]).sum(axis=1)) + top
        return summed, np.where(summed > 0, np.log(summed), exact)


class NumpyPartition:
    """:class:`LogPartition` on CPU: the same shifted matrix-product recursions and closed-form gradient,
    each time step a few NumPy operations in float64 instead of PyTorch float32 operations, whose per-call
    dispatch dominates at these sizes (tens of tags, batches of tens of sentences). float64 also makes the
    gradient's rounding independent of the batch's other rows to ~1e-16."""

    uses_blas = True  # its products run in NumPy's BLAS: on one thread (seqlab.runtime.blas)

    def __init__(self, emissions, trans, start, end, mask):
        em = emissions.astype(np.float64)
        trans, start, end = (a.astype(np.float64) for a in (trans, start, end))
        batch, seq_len, num_tags = em.shape
        padded = not bool(mask.all())
        self.tiny = np.finfo(np.float64).tiny
        self.c = trans.max()
        self.exp_trans = np.exp(trans - self.c)  # (from, to)
        alphas = np.empty((batch, seq_len, num_tags))
        shifts = np.zeros((batch, seq_len, 1))
        sums = np.ones((batch, seq_len, num_tags))
        alpha = start + em[:, 0]  # (batch, tags)
        alphas[:, 0] = alpha
        self.log_trans = log_trans = trans - self.c  # (from, to)
        for t in range(1, seq_len):
            m = alpha.max(axis=1, keepdims=True)  # (batch, 1)
            summed, log_summed = log_product(alpha - m, log_trans, self.exp_trans)  # (batch, tags)
            shifts[:, t], sums[:, t] = m, summed
            nxt = log_summed + (m + self.c) + em[:, t]
            alpha = np.where(mask[:, t, None], nxt, alpha) if padded else nxt
            alphas[:, t] = alpha
        last = alphas[:, -1] + end  # (batch, tags): padded rows carry their last alpha
        top = last.max(axis=1, keepdims=True)
        self.log_z = np.log(np.exp(last - top).sum(axis=1)) + top[:, 0]  # (batch,)
        self.em, self.end, self.mask, self.padded = em, end, mask, padded
        self.alphas, self.shifts, self.sums = alphas, shifts, sums

    def betas(self) -> np.ndarray:
        """(batch, seq_len, tags): beta_t[i], the log-sum of every continuation after step t from tag i (its
        emission excluded); it stays ``end`` on a row's last real step and on its padding."""
        em, mask = self.em, self.mask
        batch, seq_len, num_tags = em.shape
        exp_trans_t = np.ascontiguousarray(self.exp_trans.T)  # (to, from)
        log_trans_t = self.log_trans.T  # (to, from)
        betas = np.empty((batch, seq_len, num_tags))
        beta = np.broadcast_to(self.end, (batch, num_tags))  # (batch, tags)
        betas[:, seq_len - 1] = beta
        for t in range(seq_len - 2, -1, -1):
            v = em[:, t + 1] + beta  # (batch, to)
            mv = v.max(axis=1, keepdims=True)
            nxt = log_product(v - mv, log_trans_t, exp_trans_t)[1] + (mv + self.c)  # (batch, from)
            beta = np.where(mask[:, t + 1, None], nxt, beta) if self.padded else nxt
            betas[:, t] = beta
        return betas

    def gradients(self, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        """d(sum_b grad_b log Z_b) / d(emissions, trans, start, end), as :meth:`LogPartition.backward`."""
        mask, alphas, tiny = self.mask, self.alphas, self.tiny
        batch, _, num_tags = alphas.shape
        betas = self.betas()
        marg = np.exp(alphas + betas - self.log_z[:, None, None]) * (mask[:, :, None] * grad[:, None, None])
        grad_start = marg[:, 0].sum(0)  # (tags,)
        last = alphas[np.arange(batch), mask.sum(1) - 1]  # (batch, tags)
        grad_end = (np.exp(last + self.end - self.log_z[:, None]) * grad[:, None]).sum(0)
        # pair marginals summed over rows and steps, as one matrix product (see LogPartition.backward)
        x = np.exp(alphas[:, :-1] - self.shifts[:, 1:])  # (batch, seq_len - 1, from)
        sums = self.sums[:, 1:]
        y = np.where(sums > tiny, marg[:, 1:] / np.maximum(sums, tiny), 0.0)  # (batch, seq_len - 1, to)
        grad_trans = (x.reshape(-1, num_tags).T @ y.reshape(-1, num_tags)) * self.exp_trans  # (from, to)
        return marg, grad_trans, grad_start, grad_end


class Underflow(ArithmeticError):
    """A probability of :class:`ScaledPartition` that must be positive underflowed float64 to 0."""


class ScaledPartition:
    """:class:`NumpyPartition`'s log Z and gradients from the recursions in probability space (Rabiner's scaling):
    a_t = (a_{t-1} @ E) * P_t / S_t with E = exp(trans - max trans) (from, to), P_t = exp(emissions_t - their max),
    and S_t the sum that makes a_t sum to 1; b_t = E @ (P_{t+1} * b_{t+1}), rescaled to sum 1 as well. Then
    log Z = sum_t (log S_t + max emissions_t) + (n - 1) max trans + max start + log(a_{n-1} . exp(end - max end)) +
    max end, the token marginals are a_t b_t / (a_t . b_t), and the pair marginals a_{t-1}[i] E[i, j] P_t[j] b_t[j] /
    (S_t a_t . b_t). Each step is a matrix product and three element-wise calls instead of about ten, and no log or
    exp; the results equal the log-space ones to float64 rounding. A value that must be positive but underflowed
    (emissions or transitions spread over more than about 700 between reachable tags) raises :class:`Underflow`,
    and :meth:`or_log_space` then runs :class:`NumpyPartition` instead. Arrays are time-major, (seq_len, batch,
    tags), so that each step reads and writes contiguous rows."""

    uses_blas = True  # its products run in NumPy's BLAS: on one thread (seqlab.runtime.blas)

    @classmethod
    def or_log_space(cls, emissions, trans, start, end, mask) -> ScaledPartition | NumpyPartition:
        try:
            return cls(emissions, trans, start, end, mask)
        except Underflow:
            return NumpyPartition(emissions, trans, start, end, mask)

    def __init__(self, emissions, trans, start, end, mask):
        self.inputs = (emissions, trans, start, end, mask)  # for the log-space gradient, should one underflow
        trans, start, end = (a.astype(np.float64) for a in (trans, start, end))
        batch, seq_len, num_tags = emissions.shape
        lengths = mask.sum(1)  # (batch,)
        self.padded = bool((lengths < seq_len).any())
        keep = np.ascontiguousarray(mask.T)[:, :, None]  # (seq_len, batch, 1): real steps
        c = trans.max()
        self.exp_trans = exp_trans = np.exp(trans - c)  # (from, to); disallowed moves exactly 0
        em = emissions.astype(np.float64).transpose(1, 0, 2)  # (seq_len, batch, tags)
        top = em.max(axis=2, keepdims=True)  # (seq_len, batch, 1)
        probs = np.exp(em - top)  # (seq_len, batch, tags), contiguous; max 1 per step
        if self.padded:
            probs = np.where(keep, probs, 1.0)  # padding: finite, and never read into a real step
        alphas = np.empty((seq_len, batch, num_tags))
        sums = np.empty((seq_len, batch, 1))
        a = np.exp(start - start.max()) * probs[0]  # (batch, tags)
        sums[0] = a.sum(1, keepdims=True)
        alphas[0] = a / sums[0]
        with np.errstate(all="ignore"):  # padding may divide 0 by 0; real steps are checked below
            for t in range(1, seq_len):
                u = alphas[t - 1] @ exp_trans  # (batch, tags)
                u *= probs[t]
                s = u.sum(1, keepdims=True)  # (batch, 1)
                u /= s
                alphas[t] = u
                sums[t] = s
            self.end_probs = np.exp(end - end.max())  # (tags,)
            final = alphas[lengths - 1, np.arange(batch)] @ self.end_probs  # (batch,)
            log_sums = np.where(keep, np.log(sums), 0.0).sum(0)[:, 0]  # (batch,)
        if not (np.isfinite(log_sums).all() and (final > 0).all()):
            raise Underflow
        self.log_z = (
            np.where(keep, top, 0.0).sum(0)[:, 0]
            + log_sums
            + np.log(final)
            + (lengths - 1) * c
            + start.max()
            + end.max()
        )  # (batch,)
        self.keep, self.lengths, self.probs, self.alphas, self.sums = keep, lengths, probs, alphas, sums

    def gradients(self, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        """d(sum_b grad_b log Z_b) / d(emissions, trans, start, end), as :meth:`NumpyPartition.gradients`."""
        keep, probs, alphas, exp_trans = self.keep, self.probs, self.alphas, self.exp_trans
        seq_len, batch, num_tags = alphas.shape
        exp_trans_t = np.ascontiguousarray(exp_trans.T)  # (to, from)
        betas = np.empty_like(alphas)  # (seq_len, batch, tags)
        b = np.broadcast_to(self.end_probs, (batch, num_tags))
        betas[seq_len - 1] = b
        with np.errstate(all="ignore"):
            for t in range(seq_len - 2, -1, -1):
                nxt = (probs[t + 1] * b) @ exp_trans_t  # (batch, from)
                nxt /= nxt.sum(1, keepdims=True)
                b = np.where(keep[t + 1], nxt, self.end_probs) if self.padded else nxt  # a row's last step: end
                betas[t] = b
            joint = alphas * betas  # (seq_len, batch, tags)
            norm = joint.sum(2, keepdims=True)  # (seq_len, batch, 1): a_t . b_t
            weight = grad[None, :, None] / norm  # (seq_len, batch, 1)
            positive = np.where(keep, norm > 0, True).all()  # also False for NaN
            marg = np.where(keep, joint * weight, 0.0)  # (seq_len, batch, tags): grad_b p(y_t = j)
            # pair marginals summed over rows and steps, one matrix product (see the class docstring)
            y = np.where(keep[1:], probs[1:] * betas[1:] * (weight[1:] / self.sums[1:]), 0.0)  # (seq_len - 1, ...)
        if not positive:
            return NumpyPartition(*self.inputs).gradients(grad)
        grad_trans = (alphas[:-1].reshape(-1, num_tags).T @ y.reshape(-1, num_tags)) * exp_trans  # (from, to)
        grad_start = marg[0].sum(0)  # (tags,)
        grad_end = marg[self.lengths - 1, np.arange(batch)].sum(0)  # (tags,)
        return np.ascontiguousarray(marg.transpose(1, 0, 2)), grad_trans, grad_start, grad_end
