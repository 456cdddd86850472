"""Word BiLSTM at inference on padded batches of random lengths (3-45 tokens, unsorted, like a server's
micro-batches): the per-direction path against packed sequences (BiLSTM(packed_inference=True)), ms per
batch, 1 thread, best of 3 x 20 batches, at 2, 4, 8, 16 and 64 sentences. Checks both give the same real steps.

    python benchmarks/packed_lstm_ab.py
"""

import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from seqlab.lstm import BiLSTM

torch.set_num_threads(1)
torch.manual_seed(0)
random.seed(0)
m = BiLSTM(130, 100).eval()
p = BiLSTM(130, 100, packed_inference=True).eval()
p.load_state_dict(m.state_dict())
for b in (2, 4, 8, 16, 64):
    cases = []
    for _ in range(20):
        lens = sorted([random.randint(3, 45) for _ in range(b)], reverse=True)
        x = torch.randn(b, max(lens), 130)
        cases.append((x, torch.tensor(lens)))
    with torch.inference_mode():
        for x, lengths in cases[:3]:
            a, c = m(x, lengths), p(x, lengths)
            mask = torch.arange(x.shape[1])[None] < lengths[:, None]
            assert torch.allclose(a[mask], c[mask], atol=1e-5)
        res = {}
        for _rep in range(3):
            for name, net in (("per_direction", m), ("packed", p)):
                s = time.perf_counter()
                for x, lengths in cases:
                    net(x, lengths)
                res.setdefault(name, []).append((time.perf_counter() - s) / len(cases) * 1e3)
    print(b, {k: round(min(v), 2) for k, v in res.items()}, "ms")
