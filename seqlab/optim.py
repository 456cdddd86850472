"""Optimisers: NAdam whose square root of the second moments avoids PyTorch's slow path on zeros (the same update,
faster), and SGD whose fused update tells autograd's version counters that it changed the parameters.

PyTorch's CPU ``sqrt`` kernel (2.x, AVX2 build) takes about ten times longer on exact zeros than on other
values: on 947,500 floats, 5-8 ms for zeros against 0.6 ms for random values. In an Adam-type optimiser the
second moments of a trained embedding matrix are exactly zero on every row whose word has not been seen yet,
which early in training is most of them (763,000 of the chunker's 947,500 after 120 steps), so the square
root of that one tensor was about a sixth of a batch-10 training step.

:class:`NAdam` is ``torch.optim.NAdam`` (same hyper-parameters, state, ``state_dict`` and class name, so
checkpoints of either load into the other) with one change in its multi-tensor step: the square root is taken
of the second moments raised to at least the smallest normal float, ``tiny``. That changes nothing in the
update: the denominator is sqrt(v) / sqrt(1 - beta2^t) + eps, and for v < tiny both sqrt(v) and sqrt(tiny)
(1.1e-19 in float32) divided by sqrt(1 - beta2^t) >= sqrt(1 - beta2) are below half a unit in the last place
of eps, so the sum is eps exactly, as it is in PyTorch's step. Every other operation is PyTorch's in
PyTorch's order, so the parameters after a step are the same bits (tested against ``torch.optim.NAdam``).
Where that bound does not hold (an eps below about 1e-11 in float32), and for anything else (a GPU, complex
parameters, ``maximize``, ``capturable``, decoupled weight decay), ``torch.optim.NAdam``'s own step runs.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.graph import increment_version


class NAdam(torch.optim.NAdam):
    """``torch.optim.NAdam(params, lr, betas, eps, weight_decay, momentum_decay)`` without the slow square
    root of zeros (see the module)."""

    def __init__(self, params, lr: float = 2e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum_decay: float = 4e-3):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         momentum_decay=momentum_decay, foreach=True)

    @torch.no_grad()
    def step(self, closure=None):
        if closure is not None or not all(self._own_path(g) for g in self.param_groups):
            return super().step(closure)
        for group in self.param_groups:
            self._step_group(group)
        return None

    def _own_path(self, group: dict) -> bool:
        """Whether :meth:`_step_group` gives this group torch.optim.NAdam's exact update."""
        plain = not (group["maximize"] or group["capturable"] or group["differentiable"]
                     or group.get("decoupled_weight_decay", False))
        dtypes = {p.dtype for p in group["params"] if p.grad is not None}
        return plain and dtypes <= {torch.float32, torch.float64} and all(
            _negligible_below_eps(dtype, group["betas"][1], group["eps"]) for dtype in dtypes)

    def _step_group(self, group: dict) -> None:
        params, grads, exp_avgs, exp_avg_sqs, mu_products, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("NAdam does not support sparse gradients")
            state = self.state[p]
            if not state:  # as torch.optim.NAdam makes it
                state["step"] = torch.tensor(0.0)
                state["mu_product"] = torch.tensor(1.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            mu_products.append(state["mu_product"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay, momentum_decay = group["lr"], group["eps"], group["weight_decay"], group["momentum_decay"]
        # the operations of torch.optim.nadam._multi_tensor_nadam (non-capturable), in its order
        torch._foreach_add_(steps, torch.tensor(1.0), alpha=1.0)
        if weight_decay != 0:
            grads = torch._foreach_add(grads, params, alpha=weight_decay)
        torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
        torch._foreach_mul_(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
        denoms = torch._foreach_clamp_min(exp_avg_sqs, [torch.finfo(v.dtype).tiny for v in exp_avg_sqs])
        torch._foreach_sqrt_(denoms)  # the one change: no zeros, so no slow path (same result: see the module)
        step_values = [float(s) for s in steps]
        bias_correction_sqrt = [(1 - beta2 ** s) ** 0.5 for s in step_values]
        mus = [beta1 * (1.0 - 0.5 * (0.96 ** (s * momentum_decay))) for s in step_values]
        mu_nexts = [beta1 * (1.0 - 0.5 * (0.96 ** ((s + 1) * momentum_decay))) for s in step_values]
        torch._foreach_mul_(mu_products, mus)
        torch._foreach_div_(denoms, bias_correction_sqrt)
        torch._foreach_add_(denoms, eps)
        products = [float(m) for m in mu_products]
        step_size_grads = [(lr * (1.0 - mu) / (1.0 - prod)) * -1 for prod, mu in zip(products, mus)]
        step_size_expavg = [(lr * mu_next / (1.0 - prod * mu_next)) * -1 for prod, mu_next in zip(products, mu_nexts)]
        torch._foreach_addcdiv_(params, grads, denoms, step_size_grads)
        torch._foreach_addcdiv_(params, exp_avgs, denoms, step_size_expavg)


def _negligible_below_eps(dtype: torch.dtype, beta2: float, eps: float) -> bool:
    """sqrt(tiny) / sqrt(1 - beta2), the largest term the clamp can change, is under half an ulp of eps."""
    info = torch.finfo(dtype)
    return beta2 < 1 and math.sqrt(info.tiny) / math.sqrt(1 - beta2) < eps * info.eps / 4


class SGD(torch.optim.SGD):
    """``torch.optim.SGD`` (same arguments, state and class name) that, when ``fused``, bumps each updated
    parameter's version counter after the step. PyTorch's fused CPU kernel writes the parameters without
    counting the write, and seqlab's inference caches (the char encoders' memo, the BiLSTM's bidirectional copy,
    the exported graph; :func:`seqlab.versions.weights_key`) take an unchanged counter for unchanged weights:
    without the bump, dev scoring during training read the weights of the first epoch."""

    @torch.no_grad()
    def step(self, closure=None):
        loss = super().step(closure)
        for group in self.param_groups:
            if group.get("fused"):
                for p in group["params"]:
                    if p.grad is not None:
                        increment_version(p)
        return loss
