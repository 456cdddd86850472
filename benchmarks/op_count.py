"""Operations a training step dispatches (every call the PyTorch dispatcher sees, backward included), by the line of
seqlab that issued it: on a GPU each is at least one kernel launch. Counted on CPU, with the CRF's recursions on the
host (what CPU training and, by default, GPU training run) or as PyTorch operations (``--torch-crf``: what a GPU ran
before ``seqlab.crf_partition.GPU_ON_HOST``); and the operations of one sentence's Viterbi both ways.

    python benchmarks/op_count.py configs/chunking-bilstm-crf.yaml --data-root ../shared/data [--torch-crf]
"""

from __future__ import annotations

import argparse
import collections
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from training_setup import training_setup

from seqlab.crf import CRF
from seqlab.crf import partition as crf_partition
from seqlab.training import train_step


class Counting(TorchDispatchMode):
    """Counts dispatched operations by the innermost seqlab line on the Python stack."""

    def __init__(self, by_line: bool = True):
        super().__init__()
        self.total, self.by_line, self.lines = 0, by_line, collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.total += 1
        if self.by_line:
            ours = [
                f for f in traceback.extract_stack() if "/seqlab/" in f.filename and "site-packages" not in f.filename
            ]
            self.lines[f"{ours[-1].filename.split('seqlab/')[-1]}:{ours[-1].lineno}" if ours else "(autograd)"] += 1
        return func(*args, **(kwargs or {}))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--data-root")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--torch-crf", action="store_true")
    p.add_argument("--set", action="append", default=["model.embedder.features.word.pretrained=null"])
    args = p.parse_args()
    crf_partition.CPU_NUMPY = not args.torch_crf
    setup = training_setup(args.config, args.set, args.data_root, batches=5 + args.steps)
    config, tagger, batches = setup.config, setup.tagger, setup.batches
    params, optimizer = setup.params, setup.optimizer
    for batch in batches[:5]:  # warm-up: lazily made state is not counted
        train_step(tagger.net, batch, optimizer, params, config.train)
    with Counting() as counting:
        for batch in batches[5:]:
            train_step(tagger.net, batch, optimizer, params, config.train)
    print(
        f"{args.config}: {counting.total / args.steps:.1f} operations a training step "
        f"(CRF recursions {'as PyTorch operations' if args.torch_crf else 'on the host'})"
    )
    for line, n in counting.lines.most_common(12):
        print(f"  {n / args.steps:7.1f}  {line}")
    crf = CRF(40)
    emissions, mask = torch.randn(1, 24, 40), torch.ones(1, 24, dtype=torch.bool)
    with torch.no_grad():
        for name, decode in (("PyTorch", crf._viterbi_torch), ("host", crf._viterbi)):
            decode(emissions, mask)
            with Counting(by_line=False) as counting:
                decode(emissions, mask)
            print(f"Viterbi of one 24-token sentence, 40 tags, {name}: {counting.total} operations")


if __name__ == "__main__":
    main()
