"""PSA's additive scores on a GPU: CPU-sized blocks (``BLOCK_ELEMENTS``, many small kernels) against the GPU's
(``GPU_BLOCK_ELEMENTS``), alternating in one process, on one model and the same batches: training steps, and
tagging the test set at batch 64 and at batch 1. Prints medians per setting and the ratios.

    python benchmarks/psa_gpu_blocks.py configs/chunking-psa.yaml --data-root ../shared/data --rounds 3 \
        --set model.embedder.features.word.pretrained=null
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

import torch

from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.encoders import psa
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--data-root")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--train-batches", type=int, default=100)
    p.add_argument("--batch-1-sentences", type=int, default=400)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("psa_gpu_blocks: no CUDA GPU")
    config = load_config(args.config, args.set)
    seed_everything(config.train.seed)
    corpus = load_corpus(config.data, args.data_root)
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test, "cuda")
    params = [q for q in tagger.net.parameters() if q.requires_grad]
    optimizer = make_optimizer(params, config.train)
    batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, config.train.batch_size,
                           config.train.batch_tokens, shuffle=True, rng=random.Random(1))[: args.train_batches]
    test = corpus.test or corpus.dev
    settings = {"cpu-sized": psa.BLOCK_ELEMENTS, "gpu-sized": psa.GPU_BLOCK_ELEMENTS}

    def timed(fn) -> float:
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        return time.perf_counter() - start

    def training():
        tagger.net.train()
        for batch in batches:
            train_step(tagger.net, batch.to(tagger.device), optimizer, params, config.train)

    def tag64():
        tagger.net.eval()
        tagger.predict_tags(test, 64)

    def tag1():
        tagger.net.eval()
        tagger.predict_tags(test[: args.batch_1_sentences], 1)

    figures = {name: {"train": [], "64": [], "1": []} for name in settings}
    for r in range(args.rounds + 1):  # round 0 warms both up and is not counted
        order = list(settings) if r % 2 else list(reversed(settings))
        for name in order:
            psa.GPU_BLOCK_ELEMENTS = settings[name]
            seconds = {"train": timed(training), "64": timed(tag64), "1": timed(tag1)}
            if r:
                for key, value in seconds.items():
                    figures[name][key].append(value)
    tagger.net.eval()
    tags = {}
    for name, limit in settings.items():  # the same weights, each setting
        psa.GPU_BLOCK_ELEMENTS = limit
        tags[name] = tagger.predict_tags(test, 64)
    n = {"train": sum(len(b.index) for b in batches), "64": len(test), "1": min(len(test), args.batch_1_sentences)}
    result = {"config": args.config, "device": torch.cuda.get_device_name(), "torch": torch.__version__,
              "rounds": args.rounds, "sentences": n,
              "sentences_per_s": {name: {k: round(n[k] / statistics.median(v), 1) for k, v in f.items()}
                                  for name, f in figures.items()},
              "same_tags": tags["cpu-sized"] == tags["gpu-sized"]}
    result["gpu_over_cpu_sized"] = {k: round(result["sentences_per_s"]["gpu-sized"][k]
                                             / result["sentences_per_s"]["cpu-sized"][k], 3) for k in n}
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
