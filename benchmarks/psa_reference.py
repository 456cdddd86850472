"""PSA's additive scores as they were before the sigmoid identity (2f12ab0 and earlier: ``torch.tanh_`` on
each block), for the ``psa-tanh`` lever of ``inference_ab.py`` and ``train_step_ab.py``."""

from __future__ import annotations

import torch
from torch import Tensor

from seqlab.encoders.psa import _blocks


class TanhAdditiveScores(torch.autograd.Function):
    """scores[b, i, j] = w^T tanh(q[b, i] + k[b, j]) with PyTorch's tanh: (batch, T, d) twice, (d,) -> (batch, T, T)."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, w: Tensor) -> Tensor:
        b, t, _d = q.shape
        out = q.new_empty(b, t, t)
        for bs, qs in _blocks(q):
            out[bs, qs] = torch.tanh_(q[bs, qs, None] + k[bs, None]) @ w  # (rows, queries, T, d) @ (d,)
        ctx.save_for_backward(q, k, w)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q, k, w = ctx.saved_tensors
        d = q.shape[2]
        grad_q, grad_k, grad_w = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(w)
        for bs, qs in _blocks(q):
            h = torch.tanh_(q[bs, qs, None] + k[bs, None])  # (rows, queries, T, d), recomputed
            g = grad[bs, qs].unsqueeze(-1)  # (rows, queries, T, 1)
            grad_w += g.reshape(-1) @ h.reshape(-1, d)
            dh = h.mul_(h).neg_().add_(1.0).mul_(g).mul_(w)  # g_ij * w * (1 - h_ij^2)
            grad_q[bs, qs] += dh.sum(2)
            grad_k[bs] += dh.sum(1)
        return grad_q, grad_k, grad_w
