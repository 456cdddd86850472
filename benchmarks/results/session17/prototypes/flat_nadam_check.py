"""seqlab's NAdam with its small tensors on one concatenated copy (flat_nadam.diff) against torch's NAdam (the same bits)
and against seqlab's at a409ebd (time). flat_optim.py: seqlab/optim.py at a409ebd with flat_nadam.diff applied."""
import sys, time, torch
from flat_optim import NAdam as FlatNAdam
from seqlab.optim import NAdam  # run at a409ebd
torch.set_num_threads(2)
torch.manual_seed(0)
shapes = [(18950, 50), (400, 108), (400, 100), (400,), (400,), (40, 200), (40,), (82, 30), (9, 8)]
init = [torch.randn(s) for s in shapes]
for wd in (0.0, 0.01):
    a = [torch.nn.Parameter(x.clone()) for x in init]; b = [torch.nn.Parameter(x.clone()) for x in init]
    oa = torch.optim.NAdam(a, lr=0.01, foreach=True, weight_decay=wd); ob = FlatNAdam(b, lr=0.01, weight_decay=wd)
    for step in range(30):
        for pa, pb in zip(a, b):
            g = torch.randn_like(pa) * (step % 3)
            pa.grad = g.clone(); pb.grad = g.clone()
        oa.step(); ob.step()
    print("wd", wd, "same bits:", all(torch.equal(x, y) for x, y in zip(a, b)),
          all(torch.equal(oa.state[x]["exp_avg"], ob.state[y]["exp_avg"]) for x, y in zip(a, b)))
# timing
from nadam_timing import bench, big, mk, small
o1, o2 = mk(NAdam, small), mk(FlatNAdam, small)
o3, o4 = mk(NAdam, big + small), mk(FlatNAdam, big + small)
for _ in range(3):
    print("small: nadam", bench(o1.step), "flat", bench(o2.step), " all: nadam", bench(o3.step), "flat", bench(o4.step))
