"""The linear-chain CRF's log partition function with a hand-written gradient.

Training spends much of a CRF's time in the forward recursion's tens of small operations per time step,
and autograd records each of them and replays about twice as many in the backward pass. The gradient
of log Z is known in closed form, so :class:`LogPartition` runs the recursion without recording and
computes the gradient with one backward recursion (beta) and a few whole-tensor operations:

* d log Z / d emissions[b, t, j] = p(y_t = j | x_b)                          (token marginals)
* d log Z / d start[j]           = sum_b p(y_0 = j | x_b)
* d log Z / d end[j]             = sum_b p(y_{n_b - 1} = j | x_b)
* d log Z / d trans[i, j]        = sum_b sum_{0 < t < n_b} p(y_{t-1} = i, y_t = j | x_b)   (pair marginals)

On CPU the recursions and the gradient run in NumPy float64 (one BLAS thread): a batch-10 training step of the
chunker 1.08x (NAdam) and 1.10x (SGD) faster than with these PyTorch operations (BENCHMARKS.md), the gradient equal
to theirs to float32 rounding (tests/test_crf.py). There they run in probability space, each step's vector rescaled
to sum 1 (:class:`_ScaledPartition`: about half the NumPy calls of the log-space recursions, which remain for the
rare batch whose probabilities underflow float64). Where Numba is installed, the probability-space recursions run
compiled (:mod:`seqlab.crf.compiled`, a loop nest per sentence instead of NumPy calls per time step: the same float64
formulas, about 2.5x faster). On a CUDA GPU the inputs are copied to the host and the same CPU recursions run there
(:data:`GPU_ON_HOST`): the PyTorch recursions are a few operations per time step, each a kernel launch there.
Elsewhere, and where :data:`GPU_ON_HOST` is off, the PyTorch recursions run, in exact log space.

The two recursions (:func:`alpha_recursion`, :func:`beta_recursion`) are also what the CRF's marginals,
span probabilities and confidences use (:meth:`seqlab.crf.crf.CRF._forward_backward`). The gradient equals
autograd's through the recorded forward recursion up to float rounding (tests/test_crf.py checks it).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seqlab.runtime.blas import one_blas_thread
from seqlab.crf.compiled import CompiledPartition, kernels

#: Pair marginals of the PyTorch gradient are summed over blocks of time steps of at most this many
#: (batch x steps x tags x tags) elements: memory stays bounded for long sentences and large tag sets.
PAIR_BLOCK = 1 << 24


def alpha_recursion(emissions: Tensor, trans: Tensor, start: Tensor, mask: Tensor) -> Tensor:
    """(batch, seq_len, tags): alpha_t[j], the log-sum of every prefix ending in j at t (its emission included;
    padded steps keep the last real one), by an exact log-sum-exp over (batch, from, to) each step. Exact where
    a shifted matrix product in probability space is not: there a state reached only through moves penalised as
    disallowed, or only from states far below the step's best, underflows to 0, and no floor for its log is
    right when its emission is large (a floor of log(tiny) once put log Z near 113 where it is 1.4). These
    recursions run on GPUs, for marginals with gradients, and for dtypes NumPy does not take; CPU training
    uses :class:`_ScaledPartition`. Inputs as :class:`LogPartition`'s."""
    batch, seq_len, num_tags = emissions.shape
    padded = not bool(mask.all())
    mask_t = mask.unsqueeze(2)  # (batch, seq_len, 1)
    alphas = emissions.new_empty(batch, seq_len, num_tags)
    alpha = start + emissions[:, 0]  # (batch, tags)
    alphas[:, 0] = alpha
    for t in range(1, seq_len):
        nxt = torch.logsumexp(alpha.unsqueeze(2) + trans, dim=1) + emissions[:, t]  # over (batch, from, to)
        alpha = torch.where(mask_t[:, t], nxt, alpha) if padded else nxt
        alphas[:, t] = alpha
    return alphas


def beta_recursion(emissions: Tensor, trans: Tensor, end: Tensor, mask: Tensor) -> Tensor:
    """(batch, seq_len, tags): beta_t[i], the log-sum of every continuation after step t from tag i (its
    emission excluded); it stays ``end`` on a row's last real step and on its padding. An exact per-row
    log-sum-exp, whose float32 results do not depend on the batch's other rows (the marginals and confidences
    that predictions report are equal at any batch size)."""
    batch, seq_len, num_tags = emissions.shape
    padded = not bool(mask.all())
    mask_t = mask.unsqueeze(2)  # (batch, seq_len, 1)
    betas = emissions.new_empty(batch, seq_len, num_tags)
    beta = end.expand(batch, num_tags)  # (batch, tags)
    betas[:, seq_len - 1] = beta
    for t in range(seq_len - 2, -1, -1):
        v = emissions[:, t + 1] + beta  # (batch, to)
        nxt = torch.logsumexp(trans + v.unsqueeze(1), dim=2)  # (batch, from)
        beta = torch.where(mask_t[:, t + 1], nxt, beta) if padded else nxt
        betas[:, t] = beta
    return betas


class LogPartition(torch.autograd.Function):
    """log Z per sentence, (batch,). Inputs: emissions (batch, seq_len, tags) trimmed to the longest
    sentence; trans (from, to), start and end (tags,) with constraint penalties already added; mask
    (batch, seq_len) bool, left-aligned, first column True. On CPU, and on a CUDA GPU by way of the host
    (:func:`on_host`), both recursions and the gradient run in NumPy float64 (:func:`_cpu_partition`), elsewhere as
    PyTorch operations."""

    @staticmethod
    def forward(ctx, emissions: Tensor, trans: Tensor, start: Tensor, end: Tensor, mask: Tensor) -> Tensor:
        if on_host(emissions):
            ctx.numpy = _cpu_partition(*(x.detach().cpu().numpy() for x in (emissions, trans, start, end, mask)))
            ctx.dtypes = [x.dtype for x in (emissions, trans, start, end)]  # the gradients' dtypes
            ctx.device = emissions.device  # where the gradients go back to
            return torch.from_numpy(ctx.numpy.log_z).to(device=emissions.device, dtype=emissions.dtype)
        ctx.numpy = None
        alphas = alpha_recursion(emissions, trans, start, mask)
        log_z = torch.logsumexp(alphas[:, -1] + end, dim=1)  # (batch,): padded rows carry their last alpha
        ctx.save_for_backward(emissions, trans, end, mask, alphas, log_z)
        return log_z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        if ctx.numpy is not None:
            with one_blas_thread() if ctx.numpy.uses_blas else contextlib.nullcontext():
                grads = ctx.numpy.gradients(grad.detach().cpu().to(torch.float64).numpy())
            return (*(torch.from_numpy(g).to(device=ctx.device, dtype=d) for g, d in zip(grads, ctx.dtypes)), None)
        emissions, trans, end, mask, alphas, log_z = ctx.saved_tensors
        num_tags = emissions.shape[2]
        betas = beta_recursion(emissions, trans, end, mask)
        weight = grad[:, None, None]  # (batch, 1, 1)
        marg = (alphas + betas - log_z[:, None, None]).exp().masked_fill(~mask.unsqueeze(2), 0.0) * weight
        grad_start = marg[:, 0].sum(0)  # (tags,)
        last = (mask.sum(1) - 1)[:, None, None].expand(-1, 1, num_tags)  # (batch, 1, tags)
        grad_end = ((alphas.gather(1, last).squeeze(1) + end - log_z[:, None]).exp() * grad[:, None]).sum(0)
        # pair marginals p(y_{t-1} = i, y_t = j) = exp(alpha_{t-1}[i] + trans[i, j] + emission_t[j] + beta_t[j]
        # - log Z), exact in log space, summed over rows and real steps t >= 1, in blocks of steps
        into = emissions[:, 1:] + betas[:, 1:] - log_z[:, None, None]  # (batch, seq_len - 1, to)
        into = into.masked_fill(~mask[:, 1:, None], float("-inf"))  # padded steps: no pairs (exp gives 0)
        prev = alphas[:, :-1]  # (batch, seq_len - 1, from): alpha_{t-1} beside step t's into
        weight_t = grad[:, None, None, None]  # (batch, 1, 1, 1)
        grad_trans = torch.zeros_like(trans)  # (from, to)
        block = max(1, PAIR_BLOCK // max(1, emissions.shape[0] * num_tags * num_tags))
        for t in range(0, emissions.shape[1] - 1, block):
            pair = prev[:, t:t + block, :, None] + trans + into[:, t:t + block, None, :]  # (batch, steps, from, to)
            grad_trans += (pair.exp() * weight_t).sum((0, 1))
        return marg, grad_trans, grad_start, grad_end, None


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


#: Whether :class:`LogPartition` runs on CPU in NumPy (True) or as PyTorch operations (tests compare the two).
CPU_NUMPY = True
#: Whether :class:`LogPartition` on a CUDA GPU copies its inputs to the host and runs the CPU's recursions (True)
#: or runs the PyTorch recursions on the GPU (False). A training step of the CoNLL-2000 chunker (batch 10, 40 tags)
#: dispatched 715 PyTorch operations with the PyTorch recursions and 304 with the host's (benchmarks/op_count.py);
#: on a GPU each is at least one kernel launch, and such a step took 13-17 ms on an H100 (BENCHMARKS.md, twenty-first
#: session). The host's way costs two waits for the GPU and a few small copies a step. Its effect on a GPU's time
#: is not measured yet: ``benchmarks/gpu_lever_ab.py --lever host-crf`` measures it.
GPU_ON_HOST = True
#: Whether the NumPy recursions run in probability space (:class:`_ScaledPartition`, falling back to the log-space
#: ones where a sentence underflows) or always in log space (:class:`_NumpyPartition`; tests and benchmarks compare).
CPU_SCALED = True
#: Whether the probability-space recursions run compiled (:class:`seqlab.crf.compiled.CompiledPartition`, where
#: Numba is installed) or as NumPy calls (:class:`_ScaledPartition`; tests and benchmarks compare).
CPU_COMPILED = True


def on_host(x: Tensor) -> bool:
    """Whether the CRF's recursions for ``x`` (emissions) run on the host's NumPy / Numba path."""
    if x.dtype not in (torch.float32, torch.float64):
        return False
    return CPU_NUMPY if x.device.type == "cpu" else GPU_ON_HOST and x.device.type == "cuda"


def _cpu_partition(emissions, trans, start, end, mask):
    """log Z and its gradients' source on CPU, by :data:`CPU_SCALED` and :data:`CPU_COMPILED`; the log-space
    recursions wherever probability space underflows."""
    compiled = CPU_SCALED and CPU_COMPILED and kernels() is not None
    if compiled:
        try:
            return CompiledPartition(emissions, trans, start, end, mask)
        except _Underflow:
            pass
    with one_blas_thread():
        if CPU_SCALED and not compiled:
            return _ScaledPartition.or_log_space(emissions, trans, start, end, mask)
        return _NumpyPartition(emissions, trans, start, end, mask)


class _NumpyPartition:
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


class _Underflow(ArithmeticError):
    """A probability of :class:`_ScaledPartition` that must be positive underflowed float64 to 0."""


class _ScaledPartition:
    """:class:`_NumpyPartition`'s log Z and gradients from the recursions in probability space (Rabiner's scaling):
    a_t = (a_{t-1} @ E) * P_t / S_t with E = exp(trans - max trans) (from, to), P_t = exp(emissions_t - their max),
    and S_t the sum that makes a_t sum to 1; b_t = E @ (P_{t+1} * b_{t+1}), rescaled to sum 1 as well. Then
    log Z = sum_t (log S_t + max emissions_t) + (n - 1) max trans + max start + log(a_{n-1} . exp(end - max end)) +
    max end, the token marginals are a_t b_t / (a_t . b_t), and the pair marginals a_{t-1}[i] E[i, j] P_t[j] b_t[j] /
    (S_t a_t . b_t). Each step is a matrix product and three element-wise calls instead of about ten, and no log or
    exp; the results equal the log-space ones to float64 rounding. A value that must be positive but underflowed
    (emissions or transitions spread over more than about 700 between reachable tags) raises :class:`_Underflow`,
    and :meth:`or_log_space` then runs :class:`_NumpyPartition` instead. Arrays are time-major, (seq_len, batch,
    tags), so that each step reads and writes contiguous rows."""

    uses_blas = True  # its products run in NumPy's BLAS: on one thread (seqlab.runtime.blas)

    @classmethod
    def or_log_space(cls, emissions, trans, start, end, mask) -> _ScaledPartition | _NumpyPartition:
        try:
            return cls(emissions, trans, start, end, mask)
        except _Underflow:
            return _NumpyPartition(emissions, trans, start, end, mask)

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
            raise _Underflow
        self.log_z = (np.where(keep, top, 0.0).sum(0)[:, 0] + log_sums + np.log(final)
                      + (lengths - 1) * c + start.max() + end.max())  # (batch,)
        self.keep, self.lengths, self.probs, self.alphas, self.sums = keep, lengths, probs, alphas, sums

    def gradients(self, grad: np.ndarray) -> tuple[np.ndarray, ...]:
        """d(sum_b grad_b log Z_b) / d(emissions, trans, start, end), as :meth:`_NumpyPartition.gradients`."""
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
            return _NumpyPartition(*self.inputs).gradients(grad)
        grad_trans = (alphas[:-1].reshape(-1, num_tags).T @ y.reshape(-1, num_tags)) * exp_trans  # (from, to)
        grad_start = marg[0].sum(0)  # (tags,)
        grad_end = marg[self.lengths - 1, np.arange(batch)].sum(0)  # (tags,)
        return np.ascontiguousarray(marg.transpose(1, 0, 2)), grad_trans, grad_start, grad_end
