"""One optimisation step: the optimiser, the learning rate of a step, clipping and the update.

:func:`train_step` is what the training loop (:mod:`seqlab.training.loop`) runs on every batch, and what the
speed benchmarks time.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch

from seqlab.config import TrainConfig
from seqlab.training.optim import SGD, NAdam


def parameter_groups(net: torch.nn.Module) -> list:
    """``net``'s trained parameters for :func:`make_optimizer`: a plain list, or, where a module sets ``lr_scale``
    (a fine-tuned transformer), one group per scale, ``{"params": [...], "lr_scale": s}``, the scale-1 group first.
    The training loop sets each group's rate to the schedule's times its ``lr_scale``."""
    scale_of = {id(p): m.lr_scale for m in net.modules() if getattr(m, "lr_scale", None) for p in m.parameters()}
    params = [p for p in net.parameters() if p.requires_grad]
    if not scale_of:
        return params
    groups: dict[float, list] = {1.0: []}
    for p in params:
        groups.setdefault(float(scale_of.get(id(p), 1.0)), []).append(p)
    return [{"params": ps, "lr_scale": s} for s, ps in groups.items() if ps]


def make_optimizer(params, cfg: TrainConfig, row_tables: bool = True) -> torch.optim.Optimizer:
    params = list(params)
    if params and isinstance(params[0], dict):  # parameter_groups: each at its share of the rate
        params = [{**group, "lr": cfg.lr * group.get("lr_scale", 1.0)} for group in params]
    # foreach: one multi-tensor update over all parameters instead of a per-tensor loop (PyTorch's
    # default on CPU). A small gain: NAdam's step on the chunking model went from 5.3 to 5.0 ms (of an
    # 18 ms batch-10 training step; most of it is the dense update of the word embedding matrix).
    if cfg.optimizer == "sgd":
        # fused: PyTorch's one-kernel update (CPU from torch 2.4), which also takes train_step's clipping factor
        # (see clip_and_step); where the installed torch or the device has none, the multi-tensor update
        # row_tables: embedding tables updated by the rows a batch read (seqlab.nn.rows), unless weight averaging reads
        # every weight after each step
        params, sgd = (
            params,
            {
                "lr": cfg.lr,
                "momentum": cfg.momentum,
                "weight_decay": cfg.weight_decay,
                "row_tables": row_tables and ROW_TABLES and not cfg.ema_decay,
            },
        )
        if FUSED_SGD and hasattr(torch.nn.utils, "get_total_norm"):
            try:
                return SGD(params, fused=True, **sgd)  # torch's, counting its writes (see seqlab.training.optim.SGD)
            except RuntimeError:
                pass
        return SGD(params, foreach=True, **sgd)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_eps, weight_decay=cfg.weight_decay, foreach=True)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, lr=cfg.lr, eps=cfg.adam_eps, weight_decay=cfg.weight_decay, foreach=True)
    return NAdam(params, lr=cfg.lr, eps=cfg.adam_eps, weight_decay=cfg.weight_decay)  # torch's update, fused on CPU


def train_step(
    net, batch, optimizer: torch.optim.Optimizer, params, cfg: TrainConfig, scale: float | None = None
) -> torch.Tensor:
    """One optimisation step on one batch (loss, backward, clipping, update): the per-sentence
    losses, shape (batch,), detached. ``scale``: a data-parallel rank's weight of its summed loss
    (:class:`seqlab.training.ranks.Shard`); None: the batch's sum or mean, as ``cfg.loss_reduction`` says."""
    losses = net.loss(batch)  # (batch,)
    if scale is None:
        loss = losses.sum() if cfg.loss_reduction == "sum" else losses.mean()
    else:
        loss = losses.sum() * scale
    clear_grads(optimizer)
    loss.backward()
    clip_and_step(optimizer, params, cfg.clip)
    return losses.detach()


#: Whether make_optimizer builds PyTorch's fused SGD where it can (tests and benchmarks compare with foreach).
FUSED_SGD = True
#: Whether make_optimizer's SGD updates embedding tables by rows (seqlab.nn.rows; benchmarks compare with the dense
#: update).
ROW_TABLES = True


def clear_grads(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.zero_grad(set_to_none=True)``'s effect, every gradient None, without its profiler label and
    dispatch wrapper (about 150 against 30 us a step on the chunker's 18 tensors)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


def clip_and_step(optimizer: torch.optim.Optimizer, params, clip: float | None) -> None:
    """Scale the gradients to a total norm of at most ``clip`` (as ``clip_grad_norm_``: factor clip / (norm +
    1e-6) when below 1), then the optimiser's step. A fused SGD, and seqlab's NAdam where its step runs fused,
    take the factor's inverse as their ``grad_scale`` and divide each gradient by it inside their update, which
    saves a pass over every gradient (the word table's included); the same update to float rounding."""
    fused = (
        isinstance(optimizer, torch.optim.SGD) and all(group.get("fused") for group in optimizer.param_groups)
    ) or (isinstance(optimizer, (NAdam, SGD)) and optimizer.takes_grad_scale())
    fused = fused and hasattr(torch.nn.utils, "get_total_norm")  # torch >= 2.6; else clip_grad_norm_ first
    grads = [_norm_part(q) for q in params if q.grad is not None] if clip and fused else []
    if grads and len({g.dtype for g in grads}) == 1:  # its grad_scale: one dtype
        norm = torch.nn.utils.get_total_norm(grads)
        optimizer.grad_scale = (norm + 1e-6).div_(clip).clamp_(min=1.0)  # 1 / clip_grad_norm_'s factor
        try:
            optimizer.step()
        finally:
            del optimizer.grad_scale
        return
    if clip:
        grads = [_norm_part(q) for q in params if q.grad is not None]
        if any(q.grad is not None and q.grad.is_sparse for q in params):  # clip_grad_norm_ takes no sparse
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g).double() for g in grads]))
            factor = clip / (float(norm) + 1e-6)
            if factor < 1.0:
                torch._foreach_mul_(grads, factor)  # a sparse gradient's values are its own
        else:
            torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()


def _norm_part(q: torch.Tensor) -> torch.Tensor:
    """The values whose norm is ``q.grad``'s: a row-sparse gradient (seqlab.nn.rows) coalesced, in place of
    ``q.grad``."""
    if q.grad.is_sparse:
        q.grad = q.grad.coalesce()
        return q.grad.values()
    return q.grad


def learning_rate(
    cfg: TrainConfig, epoch: int, step: int = 0, steps: int = 1, done: int | None = None, progress: float = 0.0
) -> float:
    """The rate for step ``step`` of ``steps`` in epoch ``epoch`` (0-based), ``done`` optimiser steps before it
    in the whole run (default ``epoch * steps + step``), ``progress`` the share of the run behind it (0 to 1: of
    the budget's training time, or of max_epochs' steps; seqlab.training.budget.Plan.progress).

    ``inverse_time``: lr_0 / (1 + rho * t), t = epochs completed (the PSA paper's schedule).
    ``step_halving``: lr_0 * 0.5 ** (max(0, done - hold) / half_life), at least ``lr_min`` (GCDT's code).
    ``linear``: from lr_0 down to ``lr_min`` at the run's end; ``cosine``: the same along half a cosine.
    Each is multiplied by a linear warm-up min(1, (epoch * steps + step + 1) / (warmup_epochs * steps))
    when ``warmup_epochs`` > 0, and by min(1, progress / warmup_fraction) when ``warmup_fraction`` > 0."""
    if done is None:
        done = epoch * steps + step
    if cfg.lr_schedule == "step_halving":
        lr = max(cfg.lr * 0.5 ** (max(0, done - cfg.lr_hold_steps) / cfg.lr_half_life_steps), cfg.lr_min)
    elif cfg.lr_schedule in ("linear", "cosine"):
        rest = 1.0 - min(max(progress, 0.0), 1.0)  # 1 at the start, 0 at the end
        if cfg.lr_schedule == "cosine":
            rest = 0.5 * (1.0 - math.cos(math.pi * rest))
        lr = cfg.lr_min + (cfg.lr - cfg.lr_min) * rest
    else:
        lr = cfg.lr / (1.0 + cfg.lr_decay * epoch)
    if cfg.warmup_epochs:
        lr *= min(1.0, (epoch * steps + step + 1) / (cfg.warmup_epochs * steps))
    if cfg.warmup_fraction:
        lr *= min(1.0, max(progress, 1e-3) / cfg.warmup_fraction)
    return lr


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
