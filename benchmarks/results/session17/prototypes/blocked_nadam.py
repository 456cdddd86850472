"""Prototype: seqlab.optim.NAdam's step with large tensors cut into blocks, all ops run per block."""
import torch
from seqlab.optim import NAdam

BLOCK = 1 << 17

class BlockedNAdam(NAdam):
    block = BLOCK
    def _step_group(self, group):
        params, grads, exp_avgs, exp_avg_sqs, mu_products, steps = [], [], [], [], [], []
        for p in group["params"]:
            if p.grad is None:
                continue
            state = self.state[p]
            if not state:
                state["step"] = torch.tensor(0.0)
                state["mu_product"] = torch.tensor(1.0)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            params.append(p); grads.append(p.grad); exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"]); mu_products.append(state["mu_product"]); steps.append(state["step"])
        if not params:
            return
        beta1, beta2 = group["betas"]
        lr, eps, weight_decay, momentum_decay = group["lr"], group["eps"], group["weight_decay"], group["momentum_decay"]
        torch._foreach_add_(steps, torch.tensor(1.0), alpha=1.0)
        step_values = [float(s) for s in steps]
        bcs = [(1 - beta2 ** s) ** 0.5 for s in step_values]
        mus = [beta1 * (1.0 - 0.5 * (0.96 ** (s * momentum_decay))) for s in step_values]
        mu_nexts = [beta1 * (1.0 - 0.5 * (0.96 ** ((s + 1) * momentum_decay))) for s in step_values]
        torch._foreach_mul_(mu_products, mus)
        products = [float(m) for m in mu_products]
        sg = [(lr * (1.0 - mu) / (1.0 - prod)) * -1 for prod, mu in zip(products, mus)]
        se = [(lr * mu_next / (1.0 - prod * mu_next)) * -1 for prod, mu_next in zip(products, mu_nexts)]
        # blocks: (list of tensors per kind, scalars) ; small tensors in one block
        small = [i for i, p in enumerate(params) if p.numel() <= self.block or not p.is_contiguous()]
        blocks = [[(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i], bcs[i], sg[i], se[i]) for i in small]]
        for i, p in enumerate(params):
            if i in small: continue
            flat = [t.view(-1) for t in (p, grads[i], exp_avgs[i], exp_avg_sqs[i])]
            for start in range(0, p.numel(), self.block):
                blocks.append([(*(t[start:start + self.block] for t in flat), bcs[i], sg[i], se[i])])
        for blk in blocks:
            ps, gs, ms, vs, bc, a, b = (list(x) for x in zip(*blk))
            if weight_decay != 0:
                gs = torch._foreach_add(gs, ps, alpha=weight_decay)
            torch._foreach_lerp_(ms, gs, 1 - beta1)
            torch._foreach_mul_(vs, beta2)
            torch._foreach_addcmul_(vs, gs, gs, 1 - beta2)
            d = torch._foreach_clamp_min(vs, [torch.finfo(v.dtype).tiny for v in vs])
            torch._foreach_sqrt_(d)
            torch._foreach_div_(d, bc)
            torch._foreach_add_(d, eps)
            torch._foreach_addcdiv_(ps, gs, d, a)
            torch._foreach_addcdiv_(ps, ms, d, b)
