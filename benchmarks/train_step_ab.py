"""Two versions of a training step alternated in one process: the lever off (A) and on (B).

    python benchmarks/train_step_ab.py --lever nadam [--optimizer nadam|sgd] [--config configs/chunking-bilstm-crf.yaml]
        [--data-root ../shared/data] [--threads 2] [--reps 5] [--steps 130]

Levers: ``nadam``: torch.optim.NAdam (A) against seqlab.optim.NAdam (B); ``crf-numpy``: the CRF's log
partition and gradient as PyTorch operations (A) against NumPy float64 (B, seqlab.crf_partition.CPU_NUMPY).
Each repetition builds the tagger afresh (seed 1), takes 20 warm-up steps, then times ``--steps`` batch steps
of ``train_step``. Prints ms per step, the largest weight difference between A and B after the first
repetition (0.0: the same bits) and the ratio of medians. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

import seqlab.crf_partition as partition
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.optim import NAdam
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--lever", choices=["nadam", "crf-numpy"], required=True)
    p.add_argument("--optimizer", choices=["nadam", "sgd"], default="nadam")
    p.add_argument("--config", default="configs/chunking-bilstm-crf.yaml")
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=130)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    over = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"] if args.optimizer == "sgd" else []
    config = load_config(args.config, over)
    corpus = load_corpus(config.data, args.data_root)
    cfg = config.train
    batches, times, weights = None, {"A": [], "B": []}, {}
    for rep in range(args.reps):
        for version in times:
            on = version == "B"
            partition.CPU_NUMPY = on if args.lever == "crf-numpy" else True
            seed_everything(1)
            tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
            params = [q for q in tagger.net.parameters() if q.requires_grad]
            if args.lever == "nadam" and not on:
                opt = torch.optim.NAdam(params, lr=cfg.lr, eps=cfg.adam_eps, foreach=True)
            elif args.lever == "nadam":
                opt = NAdam(params, lr=cfg.lr, eps=cfg.adam_eps)
            else:
                opt = make_optimizer(params, cfg)
            if batches is None:
                batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers,
                                       cfg.batch_size, shuffle=True, rng=random.Random(1))[: 20 + args.steps]
            tagger.net.train()
            for b in batches[:20]:
                train_step(tagger.net, b, opt, params, cfg)
            start = time.perf_counter()
            for b in batches[20:]:
                train_step(tagger.net, b, opt, params, cfg)
            times[version].append(round((time.perf_counter() - start) / args.steps * 1000, 2))
            if rep == 0:
                weights[version] = [q.detach().clone() for q in params]
    partition.CPU_NUMPY = True
    print(f"lever {args.lever}, optimizer {args.optimizer}; ms per step, A (off): {times['A']}, B (on): {times['B']}")
    print("largest weight difference after the first repetition:",
          max((a - b).abs().max().item() for a, b in zip(weights["A"], weights["B"])))
    print("ratio of medians A / B", round(statistics.median(times["A"]) / statistics.median(times["B"]), 3))


if __name__ == "__main__":
    main()
