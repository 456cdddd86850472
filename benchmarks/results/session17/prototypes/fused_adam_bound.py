"""NAdam against PyTorch's fused and multi-tensor Adam in the same training loop (a bound for a fused NAdam)."""
import sys, time, torch
from chunker import chunker
from seqlab.training import make_optimizer, train_step
net, cfg, params, batches = chunker()
opts = {"nadam": make_optimizer(params, cfg), "fused_adam": torch.optim.Adam(params, lr=2e-3, fused=True),
        "foreach_adam": torch.optim.Adam(params, lr=2e-3, foreach=True)}
res = {k: [] for k in opts}
for b in batches[:30]:
    for o in opts.values(): train_step(net, b, o, params, cfg)
i = 30
for rep in range(5):
    for name, o in opts.items():
        t = time.perf_counter()
        for b in batches[i:i+60]: train_step(net, b, o, params, cfg)
        res[name].append((time.perf_counter() - t) / 60 * 1e3)
    i += 60
for k, v in res.items(): print(k, [round(x, 2) for x in v], "median", sorted(v)[2])
