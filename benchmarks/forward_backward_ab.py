"""The CRF forward-backward recursions for confidences: PyTorch float32 (seqlab.crf_partition, what
inference used before) against NumPy float64 (seqlab.posteriors), microseconds per call, 1 thread,
23 tags, random scores; batch 1 x 24, 5 x 24 and 64 x 30 tokens (one padded row). Best of 3 x 100 calls.

    python benchmarks/forward_backward_ab.py
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import time

import torch

from seqlab.crf_partition import alpha_recursion, beta_recursion
from seqlab.posteriors import forward_backward

torch.set_num_threads(1)
torch.manual_seed(0)
T = 23
for b, n in ((1, 24), (5, 24), (64, 30)):
    em = torch.randn(b, n, T)
    mask = torch.ones(b, n, dtype=torch.bool)
    if b > 1:
        mask[0, n // 2 :] = False
    trans = torch.randn(T, T)
    start = torch.randn(T)
    end = torch.randn(T)
    res = {}
    for _rep in range(3):
        for name, f in (
            (
                "torch alpha+beta",
                lambda: (alpha_recursion(em, trans, start, mask), beta_recursion(em, trans, end, mask)),  # noqa: B023
            ),
            ("numpy fb", lambda: forward_backward(*(x.numpy() for x in (em, mask, trans, start, end)))),  # noqa: B023
        ):
            with torch.no_grad():
                s = time.perf_counter()
                for _ in range(100):
                    f()
                res.setdefault(name, []).append((time.perf_counter() - s) / 100 * 1e6)
    print(b, n, {k: round(min(v)) for k, v in res.items()}, "us")
