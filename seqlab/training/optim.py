"""Optimisers: NAdam on CPU as two fused Adam calls, elsewhere with the square root of its second moments kept off
PyTorch's slow path on zeros (the same update, faster); SGD whose fused update tells autograd's version counters
that it changed the parameters.

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

On CPU without weight decay, the step is instead two calls of PyTorch's fused Adam kernel (``torch._fused_adam_``,
one pass over each tensor per call, where the multi-tensor step makes nine): NAdam's update is
p - A g / d - B m' / d, with m' = lerp(m, g, 1 - beta1), v' = beta2 v + (1 - beta2) g^2, d = sqrt(v') /
sqrt(1 - beta2^t) + eps, A = lr (1 - mu_t) / (1 - prod mu) and B = lr mu_{t+1} / (1 - prod mu mu_{t+1}). The
first call is Adam on the real m with beta1 and on a copy of v, at the rate B (1 - beta1^t): it writes m' and
p - B m' / d (the copy becomes v'). The second is Adam with beta1 = 0, whose first moment (the copy, now scratch)
becomes g exactly, and the real v, at the rate A (its first bias correction is 1 - 0^t = 1): it writes v' and
subtracts A g / d with the same d. The result equals torch.optim.NAdam's to float rounding (the kernel rounds
differently; tested), not to the bit, at one extra tensor per parameter (the copy), and a training step of the
chunker 1.10x as fast (BENCHMARKS.md, seventeenth session). The kernel also takes the clipping factor
(:func:`seqlab.training.step.clip_and_step`, ``grad_scale``: it divides the gradients in place) and does not count its
writes in the parameters' version counters, so the step bumps them, as :class:`SGD` does.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.optim.optimizer as optimizer_module
from torch.autograd.graph import increment_version

from seqlab.nn import rows


def _hooks_or_profiler(optimizer: torch.optim.Optimizer) -> bool:
    """Whether a step must go through PyTorch's wrapper: a profiler runs, or step hooks are registered (on this
    optimiser or globally). Where PyTorch no longer has the attributes this reads, True."""
    profiling = getattr(torch._C._autograd, "_profiler_enabled", None)
    hooks = [
        getattr(optimizer, "_optimizer_step_pre_hooks", None),
        getattr(optimizer, "_optimizer_step_post_hooks", None),
        getattr(optimizer_module, "_global_optimizer_pre_hooks", None),
        getattr(optimizer_module, "_global_optimizer_post_hooks", None),
    ]
    return profiling is None or profiling() or any(h is None or len(h) for h in hooks)


def _unhooked(step):
    """A PyTorch optimiser class's ``step`` without the wrapper its first instance put on it (the subclasses' own
    wrapper already ran the hooks and the label; through both, each hook ran twice)."""
    return step.__wrapped__ if getattr(step, "hooked", False) and hasattr(step, "__wrapped__") else step


class _LabelledOnDemand:
    """Optimizer's step wrapper (``profile_hook_step``: a profiler label, then step hooks) only where a profiler
    runs or hooks are registered. Its label alone cost about 70 us a step on this CPU, a training step of the
    chunker about 8 ms; the step itself is the same call."""

    @staticmethod
    def profile_hook_step(func):
        labelled = torch.optim.Optimizer.profile_hook_step(func)

        @functools.wraps(func)
        def step(self, *args, **kwargs):
            if _hooks_or_profiler(self):
                return labelled(self, *args, **kwargs)
            return func(self, *args, **kwargs)

        return step


#: Whether :class:`NAdam` runs its CPU step as two fused Adam calls where it can (tests compare with the
#: multi-tensor step, which gives torch.optim.NAdam's bits).
FUSED_NADAM = True


class NAdam(_LabelledOnDemand, torch.optim.NAdam):
    """``torch.optim.NAdam(params, lr, betas, eps, weight_decay, momentum_decay)``: on CPU two fused Adam calls
    (the same update to rounding), otherwise its multi-tensor step without the slow square root of zeros (the same
    bits); see the module."""

    def __init__(
        self,
        params,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum_decay: float = 4e-3,
    ):
        super().__init__(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum_decay=momentum_decay, foreach=True
        )

    @torch.no_grad()
    def step(self, closure=None):
        own = all(self._own_path(g) for g in self.param_groups)
        fused = [own and self._fused_path(g) for g in self.param_groups]
        grad_scale = getattr(self, "grad_scale", None)  # clip_and_step's 1 / clipping factor, fused steps only
        if grad_scale is not None and not all(fused):
            raise RuntimeError("NAdam: a grad_scale was set for a step that cannot take it")
        if closure is not None or not own:
            return _unhooked(torch.optim.NAdam.step)(self, closure)
        for group, one_pass in zip(self.param_groups, fused):
            if one_pass:
                self._fused_step(group, grad_scale)
            else:
                self._step_group(group)
        return None

    def takes_grad_scale(self) -> bool:
        """Whether every group's step runs fused, dividing the gradients by ``self.grad_scale`` when set."""
        return all(self._own_path(g) and self._fused_path(g) for g in self.param_groups)

    def _fused_path(self, group: dict) -> bool:
        params = [p for p in group["params"] if p.grad is not None]
        return (
            FUSED_NADAM
            and _HAS_FUSED_ADAM
            and group["weight_decay"] == 0
            and len({p.dtype for p in params}) <= 1
            and all(p.device.type == "cpu" and not p.grad.is_sparse for p in params)
        )

    def _fused_step(self, group: dict, grad_scale: torch.Tensor | None) -> None:
        """The group's step as two fused Adam calls (see the module), once for each set of parameters at the same
        step count and momentum product (a parameter left without a gradient lags; a loaded state may differ)."""
        beta1, beta2 = group["betas"]
        alike: dict[tuple[float, float], list[torch.Tensor]] = {}
        for p in group["params"]:
            if p.grad is not None:
                state = self._state(p)
                alike.setdefault((float(state["step"]), float(state["mu_product"])), []).append(p)
        kw = {"weight_decay": 0.0, "eps": group["eps"], "amsgrad": False, "maximize": False}
        for (done, _), ps in alike.items():
            t, states = done + 1, [self.state[p] for p in ps]
            steps, products = [st["step"] for st in states], [st["mu_product"] for st in states]
            torch._foreach_add_(steps, 1.0)
            mu, mu_next = (_momentum(beta1, x, group["momentum_decay"]) for x in (t, t + 1))
            torch._foreach_mul_(products, mu)
            lr, prod = group["lr"], float(products[0])
            a = lr * (1.0 - mu) / (1.0 - prod)  # the gradient's rate
            b = lr * mu_next / (1.0 - prod * mu_next)  # the momentum's
            grads, ms, vs = [p.grad for p in ps], [st["exp_avg"] for st in states], [st["exp_avg_sq"] for st in states]
            copies = self._copies(ps)
            torch._foreach_copy_(copies, vs)
            torch._fused_adam_(
                ps,
                grads,
                ms,
                copies,
                [],
                steps,
                lr=b * (1.0 - beta1**t),
                beta1=beta1,
                beta2=beta2,
                grad_scale=grad_scale,
                **kw,
            )  # m', p - B m'/d; the gradients divided by the scale
            torch._fused_adam_(ps, grads, copies, vs, [], steps, lr=a, beta1=0.0, beta2=beta2, **kw)  # v', p - A g/d
            for p in ps:
                increment_version(p)

    def _copies(self, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """One scratch tensor per parameter, kept between steps (not part of the state)."""
        scratch = self.__dict__.setdefault("_scratch", {})
        out = []
        for p in params:
            x = scratch.get(id(p))
            if x is None or x.shape != p.shape or x.dtype != p.dtype:
                x = scratch[id(p)] = torch.empty_like(p, memory_format=torch.contiguous_format)
            out.append(x)
        return out

    def _state(self, p: torch.Tensor) -> dict:
        """``p``'s state, made as torch.optim.NAdam makes it on a parameter's first step."""
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["mu_product"] = torch.tensor(1.0)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state

    def _own_path(self, group: dict) -> bool:
        """Whether :meth:`_step_group` gives this group torch.optim.NAdam's exact update."""
        plain = not (
            group["maximize"]
            or group["capturable"]
            or group["differentiable"]
            or group.get("decoupled_weight_decay", False)
        )
        dtypes = {p.dtype for p in group["params"] if p.grad is not None}
        return (
            plain
            and dtypes <= {torch.float32, torch.float64}
            and all(_negligible_below_eps(dtype, group["betas"][1], group["eps"]) for dtype in dtypes)
        )

    def _step_group(self, group: dict) -> None:
        params, grads, exp_avgs, exp_avg_sqs, mu_products, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            if p.grad.is_sparse:
                raise RuntimeError("NAdam does not support sparse gradients")
            state = self._state(p)
            params.append(p)
            grads.append(p.grad)
            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            mu_products.append(state["mu_product"])
            steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay, momentum_decay = (
            group["lr"],
            group["eps"],
            group["weight_decay"],
            group["momentum_decay"],
        )
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
        bias_correction_sqrt = [(1 - beta2**s) ** 0.5 for s in step_values]
        mus = [_momentum(beta1, s, momentum_decay) for s in step_values]
        mu_nexts = [_momentum(beta1, s + 1, momentum_decay) for s in step_values]
        torch._foreach_mul_(mu_products, mus)
        torch._foreach_div_(denoms, bias_correction_sqrt)
        torch._foreach_add_(denoms, eps)
        products = [float(m) for m in mu_products]
        step_size_grads = [(lr * (1.0 - mu) / (1.0 - prod)) * -1 for prod, mu in zip(products, mus)]
        step_size_expavg = [(lr * mu_next / (1.0 - prod * mu_next)) * -1 for prod, mu_next in zip(products, mu_nexts)]
        torch._foreach_addcdiv_(params, grads, denoms, step_size_grads)
        torch._foreach_addcdiv_(params, exp_avgs, denoms, step_size_expavg)


def _momentum(beta1: float, step: float, momentum_decay: float) -> float:
    """NAdam's momentum coefficient mu_t (Dozat's schedule, as torch.optim.NAdam computes it)."""
    return beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))


def _cpu_fused_adam() -> bool:
    """Whether this torch has the fused Adam kernel on CPU (from 2.4; earlier, CUDA only)."""
    x = torch.zeros(1)
    try:
        torch._fused_adam_(
            [x],
            [x.clone()],
            [x.clone()],
            [x.clone()],
            [],
            [torch.ones(())],
            lr=0.0,
            beta1=0.9,
            beta2=0.999,
            weight_decay=0.0,
            eps=1e-8,
            amsgrad=False,
            maximize=False,
        )
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return True


_HAS_FUSED_ADAM = _cpu_fused_adam()


def _negligible_below_eps(dtype: torch.dtype, beta2: float, eps: float) -> bool:
    """sqrt(tiny) / sqrt(1 - beta2), the largest term the clamp can change, is under half an ulp of eps."""
    info = torch.finfo(dtype)
    return beta2 < 1 and math.sqrt(info.tiny) / math.sqrt(1 - beta2) < eps * info.eps / 4


class SGD(_LabelledOnDemand, torch.optim.SGD):
    """``torch.optim.SGD`` (same arguments, state and class name) that, when ``fused``, bumps each updated
    parameter's version counter after the step. PyTorch's fused CPU kernel writes the parameters without
    counting the write, and seqlab's inference caches (the char encoders' memo, the BiLSTM's bidirectional copy,
    the exported graph; :func:`seqlab.nn.versions.weights_key`) take an unchanged counter for unchanged weights:
    without the bump, dev scoring during training read the weights of the first epoch.

    With ``row_tables``, each embedding table its module marked (:func:`seqlab.nn.rows.mark`) in a group with plain
    momentum is updated by rows (:mod:`seqlab.nn.rows`: the rows a batch read, the others' momentum steps applied when
    next read; the same update to rounding). Its momentum buffer is the state's ``momentum_buffer``, brought up to
    date before ``state_dict``."""

    def __init__(self, params, *args, row_tables: bool = False, **kwargs):
        super().__init__(params, *args, **kwargs)
        self.row_tables = row_tables
        self._attach_tables()

    def _attach_tables(self) -> None:
        """Make each eligible marked parameter a row table, on the state's momentum buffer when it has one."""
        if not self.row_tables:
            return
        for group in self.param_groups:
            plain = not (
                group["weight_decay"]
                or group["dampening"]
                or group["nesterov"]
                or group["maximize"]
                or group.get("differentiable")
            )
            for p in group["params"]:
                if plain and rows.marked(p) and p.dim() == 2 and p.layout == torch.strided:
                    rows.attach(p, self.state[p].get("momentum_buffer"), group["momentum"])

    def takes_grad_scale(self) -> bool:
        """Whether the step divides the gradients by ``self.grad_scale`` when set: fused, or with row tables."""
        return self.row_tables or all(group.get("fused") for group in self.param_groups)

    @torch.no_grad()
    def step(self, closure=None):
        tables = [
            (p, group)
            for group in self.param_groups
            for p in group["params"]
            if p.grad is not None and p.grad.is_sparse and rows.table(p) is not None
        ]
        grads = [p.grad for p, _ in tables]
        for p, _ in tables:
            p.grad = None  # torch's step skips them
        grad_scale = getattr(self, "grad_scale", None)
        try:
            if grad_scale is not None and not all(group.get("fused") for group in self.param_groups):
                dense = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
                torch._foreach_div_(dense, grad_scale)  # what the fused kernel does inside its update
                del self.grad_scale  # torch's unfused steps take none
            loss = _unhooked(torch.optim.SGD.step)(self, closure)
            for (p, group), grad in zip(tables, grads):
                lazy = rows.table(p)
                if "momentum_buffer" not in self.state[p] and group["momentum"]:
                    self.state[p]["momentum_buffer"] = lazy.buffer
                lazy.step(grad.coalesce(), group["lr"], group["momentum"], grad_scale)
        finally:
            for (p, _), grad in zip(tables, grads):
                p.grad = grad
            if grad_scale is not None:
                self.grad_scale = grad_scale
        for group in self.param_groups:
            if group.get("fused"):
                for p in group["params"]:
                    if p.grad is not None:
                        increment_version(p)
        return loss

    def state_dict(self):
        for group in self.param_groups:
            for p in group["params"]:
                rows.flush(p)
        return super().state_dict()

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._attach_tables()  # on the loaded momentum buffers
