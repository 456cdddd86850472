"""The chunker's parameter shapes and an isolated optimiser-step timer, shared by the NAdam prototypes."""
import time

import torch

big = [torch.randn(18950, 50)]  # the word table
small = [torch.randn(s) for s in [(400, 108), (400, 100), (400,), (400,), (400, 108), (400, 100), (400,), (400,),
                                  (40, 200), (40,), (50, 90), (50,), (82, 30), (9, 8), (40, 40), (40,), (40,),
                                  (30, 3, 30)]]


def mk(cls, ts):
    """An optimiser of class ``cls`` over copies of ``ts`` with small gradients, after one step (its state made)."""
    ps = [torch.nn.Parameter(t.clone()) for t in ts]
    for p in ps:
        p.grad = torch.randn_like(p) * 0.01
    o = cls(ps, lr=2e-3)
    o.step()
    return o


def bench(fn, n=200):
    """Median of 7 blocks of ``n`` calls, microseconds a call."""
    ts = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) / n * 1e6)
    return round(sorted(ts)[3])
