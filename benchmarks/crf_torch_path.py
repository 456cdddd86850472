"""The CRF's PyTorch log partition (the path GPUs take), forward + backward, timed on CPU for one checkout.

    python benchmarks/crf_torch_path.py /tmp/head     # a checkout's root: its seqlab is imported
    python benchmarks/crf_torch_path.py .

Forces ``seqlab.crf_partition.CPU_NUMPY = False`` (CPU training normally runs the NumPy recursions) and times
``log_partition(...).sum().backward()`` on three (batch, seq_len, tags) shapes with padding: 7 blocks of 20 calls,
median milliseconds per call. Alternate the two checkouts' processes and run nothing else meanwhile.
"""

from __future__ import annotations

import importlib
import statistics
import sys
import time
from pathlib import Path

import torch

SHAPES = ((10, 26, 40), (64, 40, 40), (32, 30, 73))  # (batch, seq_len, tags)


def time_step(crf, em: torch.Tensor, mask: torch.Tensor) -> float:
    """Median milliseconds of one log Z forward + backward."""

    def step() -> None:
        crf.log_partition(em, mask).sum().backward()

    for _ in range(5):
        step()
    times = []
    for _ in range(7):
        start = time.perf_counter()
        for _ in range(20):
            step()
        times.append((time.perf_counter() - start) / 20 * 1e3)
    return statistics.median(times)


def main() -> None:
    root = str(Path(sys.argv[1]).resolve())
    sys.path.insert(0, root)
    try:
        partition = importlib.import_module("seqlab.crf.partition")
    except ModuleNotFoundError:  # a checkout from before seqlab.crf became a package
        partition = importlib.import_module("seqlab.crf_partition")
    crf_module = importlib.import_module("seqlab.crf")
    assert partition.__file__.startswith(root), partition.__file__
    torch.set_num_threads(2)
    partition.CPU_NUMPY = False
    torch.manual_seed(0)
    out = []
    for batch, seq_len, tags in SHAPES:
        em = torch.randn(batch, seq_len, tags, requires_grad=True)
        mask = torch.ones(batch, seq_len, dtype=torch.bool)
        mask[1:, seq_len // 2 :] = False
        out.append(f"({batch},{seq_len},{tags}) {time_step(crf_module.CRF(tags), em, mask):.2f} ms")
    print(sys.argv[1], *out)


if __name__ == "__main__":
    main()
