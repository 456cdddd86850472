"""torch.optim.NAdam against seqlab.optim.NAdam on real training steps, alternated in one process.

    python benchmarks/nadam_ab.py [--config configs/chunking-bilstm-crf.yaml] [--data-root ../shared/data]
        [--threads 2] [--reps 5] [--steps 130]

Each repetition builds the tagger afresh (seed 1), takes 20 warm-up steps, then times ``--steps`` batch
steps of ``train_step``; the two optimisers alternate. Prints ms per step, whether the first repetition's
weights came out identical (``torch.equal``), and the ratio of medians. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import torch

from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.optim import NAdam
from seqlab.tagger import Tagger
from seqlab.training import seed_everything, train_step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="configs/chunking-bilstm-crf.yaml")
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=130)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    config = load_config(args.config)
    corpus = load_corpus(config.data, args.data_root)
    cfg = config.train
    batches, times, weights = None, {"torch": [], "seqlab": []}, {}
    for rep in range(args.reps):
        for name in times:
            seed_everything(1)
            tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
            params = [q for q in tagger.net.parameters() if q.requires_grad]
            opt = (torch.optim.NAdam(params, lr=cfg.lr, eps=cfg.adam_eps, foreach=True) if name == "torch"
                   else NAdam(params, lr=cfg.lr, eps=cfg.adam_eps))
            if batches is None:
                batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers,
                                       cfg.batch_size, shuffle=True, rng=random.Random(1))[: 20 + args.steps]
            tagger.net.train()
            for b in batches[:20]:
                train_step(tagger.net, b, opt, params, cfg)
            start = time.perf_counter()
            for b in batches[20:]:
                train_step(tagger.net, b, opt, params, cfg)
            times[name].append(round((time.perf_counter() - start) / args.steps * 1000, 2))
            if rep == 0:
                weights[name] = [q.detach().clone() for q in params]
    print("ms per step:", times)
    print("same weights:", all(torch.equal(a, b) for a, b in zip(weights["torch"], weights["seqlab"])))
    print("ratio of medians", round(statistics.median(times["torch"]) / statistics.median(times["seqlab"]), 3))


if __name__ == "__main__":
    main()
