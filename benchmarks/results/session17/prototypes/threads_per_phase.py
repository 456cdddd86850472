"""Training steps with the forward + backward and the update on their own thread counts, alternated in one process."""
import sys, time, torch
from chunker import SGD, chunker
from seqlab.training import clip_and_step, make_optimizer
net, cfg, params, batches = chunker(SGD if sys.argv[1] == "sgd" else [])
opt = make_optimizer(params, cfg)
def step(batch, fb_threads, opt_threads):
    torch.set_num_threads(fb_threads)
    losses = net.loss(batch)
    loss = losses.sum() if cfg.loss_reduction == "sum" else losses.mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.set_num_threads(opt_threads)
    clip_and_step(opt, params, cfg.clip)
variants = {"2/2": (2, 2), "1/2": (1, 2), "1/1": (1, 1)}
res = {k: [] for k in variants}
i = 0
for b in batches[:20]: step(b, 2, 2)
for rep in range(12):
    for k, (a, o) in variants.items():
        t = time.perf_counter()
        for b in batches[20 + i: 40 + i]: step(b, a, o)
        res[k].append((time.perf_counter() - t) / 20 * 1e3)
        i = (i + 20) % 800
for k, v in res.items(): print(sys.argv[1], k, "median", round(sorted(v)[6], 2), [round(x, 1) for x in v])
