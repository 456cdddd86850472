import os, sys, time, torch
from concurrent.futures import ThreadPoolExecutor
torch.set_num_threads(2); torch.manual_seed(0)
bi = torch.nn.LSTM(108, 100, batch_first=True, bidirectional=True)
x = torch.randn(10, 24, 108, requires_grad=True); gy = torch.randn(10, 24, 200)
def pair(): bi(x)[0].backward(gy)
def run(fn, name):
    s = time.perf_counter()
    for _ in range(30): fn()
    return round((time.perf_counter() - s) / 30 * 1e6)
ntask = lambda: len(os.listdir("/proc/self/task"))
for _ in range(2): run(pair, "")
print("before", run(pair, ""), run(pair, ""), "tasks", ntask())
mode = sys.argv[1]
lstm1 = torch.nn.LSTM(108, 100, batch_first=True)
ops = {"matmul": lambda: torch.randn(100, 100) @ torch.randn(100, 100),
       "add": lambda: torch.randn(100000) + 1,
       "lstm": lambda: lstm1(torch.randn(64, 20, 108)),
       "nothing": lambda: None}
pool = ThreadPoolExecutor(2)
if sys.argv[2] == "one": torch.set_num_threads(1)
list(pool.map(lambda i: ops[mode](), range(10)))
torch.set_num_threads(2)
print(mode, sys.argv[2], "after", run(pair, ""), run(pair, ""), "tasks", ntask())
