"""The linear-chain CRF's log partition function with a hand-written gradient.

Training spends much of a CRF's time in the forward recursion's tens of small operations per time step,
and autograd records each of them and replays about twice as many in the backward pass. The gradient
of log Z is known in closed form, so :class:`LogPartition` runs the recursion without recording and
computes the gradient with one backward recursion (beta, the same shifted matrix products as the forward
one) and a few whole-tensor operations, the pair marginals' sum included as one matrix product:

* d log Z / d emissions[b, t, j] = p(y_t = j | x_b)                          (token marginals)
* d log Z / d start[j]           = sum_b p(y_0 = j | x_b)
* d log Z / d end[j]             = sum_b p(y_{n_b - 1} = j | x_b)
* d log Z / d trans[i, j]        = sum_b sum_{0 < t < n_b} p(y_{t-1} = i, y_t = j | x_b)   (pair marginals)

The forward values are the same operations as :meth:`seqlab.crf.CRF._forward_alphas`, in the same
order, so log Z is bit-identical to it; the gradient equals autograd's up to float rounding
(tests/test_crf.py checks both).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable


class LogPartition(torch.autograd.Function):
    """log Z per sentence, (batch,). Inputs: emissions (batch, seq_len, tags) trimmed to the longest
    sentence; trans (from, to), start and end (tags,) with constraint penalties already added; mask
    (batch, seq_len) bool, left-aligned, first column True."""

    @staticmethod
    def forward(ctx, emissions: Tensor, trans: Tensor, start: Tensor, end: Tensor, mask: Tensor) -> Tensor:
        batch, seq_len, num_tags = emissions.shape
        padded = not bool(mask.all())
        c = trans.max()
        exp_trans = (trans - c).exp()  # (from, to)
        tiny = torch.finfo(emissions.dtype).tiny
        mask_t = mask.unsqueeze(2)  # (batch, seq_len, 1)
        alphas = emissions.new_empty(batch, seq_len, num_tags)
        shifts = emissions.new_zeros(batch, seq_len, 1)  # m_t: the max of alpha_{t-1}, per row
        sums = emissions.new_ones(batch, seq_len, num_tags)  # sum_i exp(alpha_{t-1}[i] - m_t + trans[i, j] - c)
        alpha = start + emissions[:, 0]  # (batch, tags)
        alphas[:, 0] = alpha
        for t in range(1, seq_len):
            m = alpha.max(dim=1, keepdim=True).values  # (batch, 1)
            summed = (alpha - m).exp() @ exp_trans  # (batch, tags)
            shifts[:, t], sums[:, t] = m, summed
            nxt = summed.clamp_min(tiny).log() + (m + c) + emissions[:, t]
            alpha = torch.where(mask_t[:, t], nxt, alpha) if padded else nxt
            alphas[:, t] = alpha
        log_z = torch.logsumexp(alpha + end, dim=1)  # (batch,)
        ctx.save_for_backward(emissions, exp_trans, c, end, mask, alphas, shifts, sums, log_z)
        ctx.padded = padded
        return log_z

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        emissions, exp_trans, c, end, mask, alphas, shifts, sums, log_z = ctx.saved_tensors
        batch, seq_len, num_tags = emissions.shape
        tiny = torch.finfo(emissions.dtype).tiny
        mask_t = mask.unsqueeze(2)  # (batch, seq_len, 1)
        # beta_t[i]: log-sum of every continuation after step t from tag i (its emission excluded); it
        # stays `end` on a row's last real step and on its padding. The same shifted product as forward.
        betas = emissions.new_empty(batch, seq_len, num_tags)
        beta = end.expand(batch, num_tags)  # (batch, tags)
        betas[:, seq_len - 1] = beta
        for t in range(seq_len - 2, -1, -1):
            v = emissions[:, t + 1] + beta  # (batch, to)
            mv = v.max(dim=1, keepdim=True).values  # (batch, 1)
            nxt = ((v - mv).exp() @ exp_trans.T).clamp_min(tiny).log() + (mv + c)  # (batch, from)
            beta = torch.where(mask_t[:, t + 1], nxt, beta) if ctx.padded else nxt
            betas[:, t] = beta
        weight = grad[:, None, None]  # (batch, 1, 1)
        marg = (alphas + betas - log_z[:, None, None]).exp().masked_fill(~mask_t, 0.0) * weight  # (batch, seq, tags)
        grad_start = marg[:, 0].sum(0)  # (tags,)
        last = (mask.sum(1) - 1)[:, None, None].expand(-1, 1, num_tags)  # (batch, 1, tags)
        grad_end = ((alphas.gather(1, last).squeeze(1) + end - log_z[:, None]).exp() * grad[:, None]).sum(0)
        # pair marginals summed over rows and steps: p(y_{t-1} = i, y_t = j) = x_t[i] exp_trans[i, j] y_t[j]
        # with x_t = exp(alpha_{t-1} - m_t) and y_t = p(y_t = j) / sums_t[j] (0 where the sum was clamped),
        # which is one matrix product over all (row, step) pairs
        x = (alphas[:, :-1] - shifts[:, 1:]).exp()  # (batch, seq_len - 1, from)
        y = marg[:, 1:] / sums[:, 1:].clamp_min(tiny) * (sums[:, 1:] > tiny)  # (batch, seq_len - 1, to)
        grad_trans = (x.reshape(-1, num_tags).T @ y.reshape(-1, num_tags)) * exp_trans  # (from, to)
        return marg, grad_trans, grad_start, grad_end, None
