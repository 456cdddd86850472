"""The CRF's PyTorch log partition (the path GPUs take), forward + backward, timed on CPU for one checkout.

    python benchmarks/crf_torch_path.py /tmp/head     # a checkout's root: its seqlab is imported
    python benchmarks/crf_torch_path.py .

Forces ``seqlab.crf_partition.CPU_NUMPY = False`` (CPU training normally runs the NumPy recursions) and times
``log_partition(...).sum().backward()`` on three (batch, seq_len, tags) shapes with padding: 7 blocks of 20 calls,
median milliseconds per call. Alternate the two checkouts' processes and run nothing else meanwhile.
"""
import sys, time, statistics, torch
sys.path.insert(0, sys.argv[1])
import seqlab.crf_partition as P
from seqlab.crf import CRF
assert P.__file__.startswith(sys.argv[1])
torch.set_num_threads(2)
P.CPU_NUMPY = False
torch.manual_seed(0)
out = []
for b, n, k in ((10, 26, 40), (64, 40, 40), (32, 30, 73)):
    crf = CRF(k)
    em = torch.randn(b, n, k, requires_grad=True)
    mask = torch.ones(b, n, dtype=torch.bool); mask[1:, n // 2:] = False
    def step():
        lz = crf.log_partition(em, mask); lz.sum().backward()
    for _ in range(5): step()
    ts = []
    for _ in range(7):
        s = time.perf_counter()
        for _ in range(20): step()
        ts.append((time.perf_counter() - s) / 20 * 1e3)
    out.append(f"({b},{n},{k}) {statistics.median(ts):.2f} ms")
print(sys.argv[1], *out)
