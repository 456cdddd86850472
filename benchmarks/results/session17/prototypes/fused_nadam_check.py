"""seqlab's NAdam (two fused Adam calls) against torch.optim.NAdam (to rounding), and its step's time with the fused
path on and off (seqlab.optim.FUSED_NADAM; off is the multi-tensor step, torch's bits)."""
import time, torch
from seqlab import optim
from seqlab.optim import NAdam
torch.set_num_threads(2); torch.manual_seed(0)
shapes = [(18950, 50), (400, 108), (400, 100), (400,), (40, 200), (82, 30)]
init = [torch.randn(s) * 0.1 for s in shapes]
a = [torch.nn.Parameter(x.clone()) for x in init]; b = [torch.nn.Parameter(x.clone()) for x in init]
oa = torch.optim.NAdam(a, lr=2e-3, foreach=True); ob = NAdam(b, lr=2e-3)
for step in range(300):
    for pa, pb in zip(a, b):
        g = torch.randn_like(pa) * 0.01
        if pa.shape[0] == 18950: g[torch.rand(18950) < 0.98] = 0
        pa.grad = g.clone(); pb.grad = g.clone()
    oa.step(); ob.step()
    if step in (0, 9, 99, 299):
        rel = max(((x - y).abs().max() / x.abs().max()).item() for x, y in zip(a, b))
        mrel = max(((oa.state[x]["exp_avg"] - ob.state[y]["exp_avg"]).abs().max() / oa.state[x]["exp_avg"].abs().max()).item() for x, y in zip(a, b))
        vrel = max(((oa.state[x]["exp_avg_sq"] - ob.state[y]["exp_avg_sq"]).abs().max() / oa.state[x]["exp_avg_sq"].abs().max()).item() for x, y in zip(a, b))
        moved = max(((x - i).abs().max()).item() for x, i in zip(a, init))
        print(f"step {step+1}: max param diff / max |param| {rel:.2e}, m {mrel:.2e}, v {vrel:.2e}; params moved up to {moved:.3e}")
from nadam_timing import bench, big, mk, small
def flagged(o, on):
    def step():
        optim.FUSED_NADAM = on
        o.step()
    return step
o1, o2 = mk(NAdam, big + small), mk(NAdam, big + small)
for _ in range(3): print("isolated step us: multi-tensor", bench(flagged(o1, False)), "fused", bench(flagged(o2, True)))
