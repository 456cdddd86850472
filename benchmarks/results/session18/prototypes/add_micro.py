import numpy as np, torch, time
from seqlab.features.chars import TokenMemo, token_hashes
rng = np.random.default_rng(0)
memo = TokenMemo(("k",), 50, torch.float32)
batches = []
for b in range(33):
    n = 250; w = rng.integers(4, 16)
    ids = np.zeros((n, w), dtype=np.int64)
    L = rng.integers(1, w + 1, n)
    for i in range(n): ids[i, :L[i]] = rng.integers(2, 80, L[i])
    batches.append((ids, token_hashes(ids), torch.randn(n, 50)))
import cProfile, pstats
t = time.perf_counter()
pr = cProfile.Profile(); pr.enable()
for ids, h, v in batches: memo.add(ids, h, v)
pr.disable()
print((time.perf_counter() - t) * 1e3, "ms")
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
