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
to sum 1 (:class:`ScaledPartition`: about half the NumPy calls of the log-space recursions, which remain for the
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

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from seqlab.crf.compiled import CompiledPartition, kernels
from seqlab.crf.host import NumpyPartition, ScaledPartition, Underflow
from seqlab.runtime.blas import one_blas_thread

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
    uses :class:`ScaledPartition`. Inputs as :class:`LogPartition`'s."""
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
            pair = prev[:, t : t + block, :, None] + trans + into[:, t : t + block, None, :]  # (batch, steps, from, to)
            grad_trans += (pair.exp() * weight_t).sum((0, 1))
        return marg, grad_trans, grad_start, grad_end, None


#: Whether :class:`LogPartition` runs on CPU in NumPy (True) or as PyTorch operations (tests compare the two).
CPU_NUMPY = True
#: Whether :class:`LogPartition` on a CUDA GPU copies its inputs to the host and runs the CPU's recursions (True)
#: or runs the PyTorch recursions on the GPU (False). A training step of the CoNLL-2000 chunker (batch 10, 40 tags)
#: dispatched 715 PyTorch operations with the PyTorch recursions and 304 with the host's (benchmarks/op_count.py);
#: on a GPU each is at least one kernel launch, and such a step took 13-17 ms on an H100 (BENCHMARKS.md, twenty-first
#: session). The host's way costs two waits for the GPU and a few small copies a step. Its effect on a GPU's time
#: is not measured yet: ``benchmarks/gpu_lever_ab.py --lever host-crf`` measures it.
GPU_ON_HOST = True
#: Whether the NumPy recursions run in probability space (:class:`ScaledPartition`, falling back to the log-space
#: ones where a sentence underflows) or always in log space (:class:`NumpyPartition`; tests and benchmarks compare).
CPU_SCALED = True
#: Whether the probability-space recursions run compiled (:class:`seqlab.crf.compiled.CompiledPartition`, where
#: Numba is installed) or as NumPy calls (:class:`ScaledPartition`; tests and benchmarks compare).
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
        except Underflow:
            pass
    with one_blas_thread():
        if CPU_SCALED and not compiled:
            return ScaledPartition.or_log_space(emissions, trans, start, end, mask)
        return NumpyPartition(emissions, trans, start, end, mask)
