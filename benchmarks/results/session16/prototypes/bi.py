import time, torch
from seqlab.lstm import BiLSTM
torch.set_num_threads(1)
torch.manual_seed(0)
m = BiLSTM(108, 100).eval()
for B, T in ((64, 24), (32, 24), (16, 24), (64, 12), (64, 40)):
    x = torch.randn(B, T, 108)
    full = torch.full((B,), T); pad = full.clone(); pad[-1] = T - 1
    with torch.inference_mode():
        a = m(x, full); b = m(x, pad)
        res = {}
        for rep in range(3):
            for name, L in (("fused", full), ("per-dir", pad)):
                m(x, L)
                s = time.perf_counter()
                for _ in range(30): m(x, L)
                res.setdefault(name, []).append((time.perf_counter() - s) / 30 * 1e6)
    print(B, T, {k: round(min(v)) for k, v in res.items()}, "per token us", {k: round(min(v) / (B * T), 2) for k, v in res.items()})
