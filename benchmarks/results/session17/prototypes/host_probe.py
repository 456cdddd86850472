import time, torch
torch.set_num_threads(2)
x = torch.randn(40000)
out = []
end = time.time() + 40
while time.time() < end:
    s = time.perf_counter()
    for _ in range(2000): x.add(1.0)
    out.append(round((time.perf_counter() - s) / 2000 * 1e6, 2))
    time.sleep(0.5)
print(out)
