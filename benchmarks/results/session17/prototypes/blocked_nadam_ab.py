"""seqlab's NAdam against its step run per block of the word table (blocked_nadam.diff), for block sizes given as
arguments, in one training loop. blocked_optim.py: seqlab/optim.py at a409ebd with blocked_nadam.diff applied."""
import sys, time, torch
import blocked_optim
from chunker import chunker
from seqlab.training import make_optimizer, train_step
net, cfg, params, batches = chunker()
opts = {"nadam": make_optimizer(params, cfg)}
blocks = {f"blocked{blk}": int(blk) for blk in sys.argv[1:]}
opts.update({name: blocked_optim.NAdam(params, lr=2e-3) for name in blocks})
res = {k: [] for k in opts}
for b in batches[:30]:
    for name, o in opts.items():
        blocked_optim.BLOCK = blocks.get(name, blocked_optim.BLOCK)
        train_step(net, b, o, params, cfg)
i = 30
for rep in range(7):
    for name, o in opts.items():
        blocked_optim.BLOCK = blocks.get(name, blocked_optim.BLOCK)
        t = time.perf_counter()
        for b in batches[i:i+50]: train_step(net, b, o, params, cfg)
        res[name].append((time.perf_counter() - t) / 50 * 1e3)
    i += 50
for k, v in res.items(): print(k, [round(x, 2) for x in v], "median", round(sorted(v)[3], 3))
