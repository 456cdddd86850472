import sys, time, torch
sys.path.insert(0, "/tmp/proto")
from two_directions_on_two_threads import TwoWay
torch.set_num_threads(2); torch.manual_seed(0)
f = torch.nn.LSTM(108, 100, batch_first=True); b = torch.nn.LSTM(108, 100, batch_first=True)
bi = torch.nn.LSTM(108, 100, batch_first=True, bidirectional=True, device="meta")
for name, q in f.named_parameters(): setattr(bi, name, q)
for name, q in b.named_parameters(): setattr(bi, name + "_reverse", q)
T = int(sys.argv[1]) if len(sys.argv) > 1 else 24
x = torch.randn(10, T, 108, requires_grad=True); gy = torch.randn(10, T, 200)
ws = list(f.parameters()) + list(b.parameters())
def two():
    y = torch.cat([f(x)[0], b(x.flip(1))[0].flip(1)], -1); y.backward(gy)
def pair():
    bi(x)[0].backward(gy)
def conc():
    TwoWay.apply(x, f, b, *ws).backward(gy)
fns = {"two": two, "pair": pair, "conc": conc}
res = {k: [] for k in fns}
for fn in fns.values():
    for _ in range(10): fn()
for rep in range(15):
    for k, fn in fns.items():
        s = time.perf_counter()
        for _ in range(30): fn()
        res[k].append((time.perf_counter() - s) / 30 * 1e6)
import os
for k, v in res.items(): print(T, k, round(sorted(v)[7]), [round(x) for x in v])
print("tasks", len(os.listdir("/proc/self/task")))
