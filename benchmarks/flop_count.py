"""FLOPs per token of a model's forward pass at inference, by operation, counted from the shapes PyTorch runs.

    python benchmarks/flop_count.py configs/psa/chunking-viii-no-fusion.yaml configs/chunking-psa.yaml \\
        --data-root ../shared/data [--sentences 256] [--batch-size 64]

Builds each config's network (fresh weights: FLOPs do not depend on them) on the corpus's training set, runs
the first ``--sentences`` test sentences through ``TaggerNet`` at ``--batch-size`` under a dispatch mode that
sees every ATen operation, and counts: matrix products 2 x M x N x K (``mm``, ``addmm``, ``bmm``, ``linear``);
the LSTM kernel ``mkldnn_rnn_layer`` as its two products per step, 2 x T x B x 4H x (I + H), plus 10 x 4H
element operations per step and row (gates, cell); every other operation one FLOP per output element (a lower
bound for ``tanh``, ``exp`` and ``sigmoid``, which cost several). Padding counts as the kernels compute it.
Prints FLOPs per real token, by operation, and the ratio between the configs.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger

aten = torch.ops.aten


class Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops: dict[str, float] = defaultdict(float)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if func.overloadpacket in (aten.mm, aten.bmm):
            a, b = args[0], args[1]
            self.flops["matmul"] += 2 * a.numel() * b.shape[-1]
        elif func.overloadpacket is aten.addmm:
            a, b = args[1], args[2]
            self.flops["matmul"] += 2 * a.numel() * b.shape[-1]
        elif name == "mkldnn_rnn_layer":
            x, w_ih, w_hh = args[0], args[1], args[2]  # (T, B, I), (4H, I), (4H, H)
            steps_rows = x.shape[0] * x.shape[1]
            gates, inputs, hidden = w_ih.shape[0], w_ih.shape[1], w_hh.shape[1]
            self.flops["lstm"] += steps_rows * (2 * gates * (inputs + hidden) + 10 * gates)
        else:
            results = out if isinstance(out, (tuple, list)) else [out]
            elements = sum(r.numel() for r in results if isinstance(r, torch.Tensor) and r.is_floating_point())
            if elements and name not in (
                "empty",
                "empty_strided",
                "view",
                "_unsafe_view",
                "as_strided",
                "t",
                "transpose",
                "expand",
                "permute",
                "slice",
                "select",
                "unsqueeze",
                "squeeze",
                "detach",
                "alias",
                "reshape",
                "split",
                "chunk",
                "unbind",
                "split_with_sizes",
                "clone",
                "contiguous",
                "copy_",
                "_to_copy",
                "lift_fresh",
                "new_empty",
                "zeros",
                "ones",
                "fill_",
                "zero_",
            ):
                self.flops[name] += elements
        return out


def count(config_path: str, args: argparse.Namespace) -> dict:
    config = load_config(config_path)
    corpus = load_corpus(config.data, args.data_root)
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    net = tagger.net.eval()
    test = (corpus.test or corpus.dev)[: args.sentences]
    encoded = tagger.encode(test)
    tokens = sum(e.length for e in encoded)
    counter = Counter()
    # as at inference: the char encoder runs once per distinct token of the pass (its memo); the decoder's
    # projection is counted, its Viterbi (NumPy) is not
    with torch.no_grad(), counter:
        for batch in make_batches(encoded, tagger.featurizers, args.batch_size):
            features, _ = net.encode(batch)
            net.decoder.proj(features)
    per_token = {k: v / tokens for k, v in sorted(counter.flops.items(), key=lambda kv: -kv[1])}
    return {
        "config": config_path,
        "tokens": tokens,
        "total_per_token": sum(per_token.values()),
        "per_token": {k: round(v) for k, v in per_token.items() if v >= 1},
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("configs", nargs="+")
    p.add_argument("--data-root", required=True)
    p.add_argument("--sentences", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out")
    args = p.parse_args()
    torch.manual_seed(1)
    results = [count(c, args) for c in args.configs]
    for r in results:
        print(f"{r['config']}: {r['total_per_token'] / 1e3:,.1f} kFLOP per token")
        for name, flops in list(r["per_token"].items())[:12]:
            print(f"    {name:28s} {flops / 1e3:10,.1f} k")
    if len(results) > 1:
        base = results[0]["total_per_token"]
        for r in results[1:]:
            print(f"{r['config']} / {results[0]['config']}: {r['total_per_token'] / base:.2f}x the FLOPs")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
