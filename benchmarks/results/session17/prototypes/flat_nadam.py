"""Prototype: NAdam's step with the small tensors' math on one flat copy (same per-element ops)."""
import torch
from seqlab.optim import NAdam

SMALL = 1 << 16

class FlatNAdam(NAdam):
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
        # flat: small contiguous tensors with the first small one's step and dtype
        small = [i for i, p in enumerate(params) if p.numel() <= SMALL and p.is_contiguous() and grads[i].is_contiguous()]
        if small:
            s0 = step_values[small[0]]; dt = params[small[0]].dtype
            small = [i for i in small if step_values[i] == s0 and params[i].dtype == dt and sg[i] == sg[small[0]] and se[i] == se[small[0]]]
        if len(small) > 1:
            ms, vs = self._flat_state([params[i] for i in small], [exp_avgs[i] for i in small], [exp_avg_sqs[i] for i in small])
            i0 = small[0]
            g = torch.cat([grads[i].view(-1) for i in small])
            pv = [params[i].view(-1) for i in small]
            p = torch.cat(pv)
            if weight_decay != 0:
                g = g.add(p, alpha=weight_decay)
            ms.lerp_(g, 1 - beta1)
            vs.mul_(beta2)
            vs.addcmul_(g, g, value=1 - beta2)
            d = vs.clamp_min(torch.finfo(vs.dtype).tiny)
            d.sqrt_()
            d.div_(bcs[i0])
            d.add_(eps)
            p.addcdiv_(g, d, value=sg[i0])
            p.addcdiv_(ms, d, value=se[i0])
            torch._foreach_copy_(pv, p.split([t.numel() for t in pv]))
            rest = [i for i in range(len(params)) if i not in set(small)]
        else:
            rest = list(range(len(params)))
        if not rest:
            return
        P = [params[i] for i in rest]; G = [grads[i] for i in rest]; M = [exp_avgs[i] for i in rest]; V = [exp_avg_sqs[i] for i in rest]
        if weight_decay != 0:
            G = torch._foreach_add(G, P, alpha=weight_decay)
        torch._foreach_lerp_(M, G, 1 - beta1)
        torch._foreach_mul_(V, beta2)
        torch._foreach_addcmul_(V, G, G, 1 - beta2)
        D = torch._foreach_clamp_min(V, [torch.finfo(v.dtype).tiny for v in V])
        torch._foreach_sqrt_(D)
        torch._foreach_div_(D, [bcs[i] for i in rest])
        torch._foreach_add_(D, eps)
        torch._foreach_addcdiv_(P, G, D, [sg[i] for i in rest])
        torch._foreach_addcdiv_(P, M, D, [se[i] for i in rest])

    def _flat_state(self, ps, ms, vs):
        cache = getattr(self, "_flat", None)
        if cache is not None and cache[0] == [id(p) for p in ps] and all(a is b for a, b in zip(cache[3], ms)) and all(a is b for a, b in zip(cache[4], vs)):
            return cache[1], cache[2]
        mflat = torch.cat([m.reshape(-1) for m in ms]); vflat = torch.cat([v.reshape(-1) for v in vs])
        sizes = [p.numel() for p in ps]
        mviews = [x.view_as(p) for x, p in zip(mflat.split(sizes), ps)]
        vviews = [x.view_as(p) for x, p in zip(vflat.split(sizes), ps)]
        for p, m, v in zip(ps, mviews, vviews):
            self.state[p]["exp_avg"] = m; self.state[p]["exp_avg_sq"] = v
        self._flat = ([id(p) for p in ps], mflat, vflat, mviews, vviews)
        return mflat, vflat
