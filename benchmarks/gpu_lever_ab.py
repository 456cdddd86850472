"""A GPU lever, off against on, alternating in one process on one model and the same batches: training steps, and
tagging the test set at batch 64 and at batch 1. Prints medians per setting, the ratios, and whether both settings
tag the whole test set alike (with the same weights). Levers (module switches):

* ``psa-blocks``: PSA's additive scores in CPU-sized blocks (``BLOCK_ELEMENTS``) against GPU-sized ones
  (``GPU_BLOCK_ELEMENTS``), seqlab.encoders.psa; run on a PSA config.
* ``host-crf``: the CRF's training recursions as PyTorch operations on the GPU against the CPU's on the host
  (``seqlab.crf_partition.GPU_ON_HOST``).
* ``host-viterbi``: Viterbi of batches of 1-2 sentences on the GPU against on the host
  (``seqlab.crf.GPU_HOST_VITERBI_ROWS`` 0 against 2).

    python benchmarks/gpu_lever_ab.py configs/chunking-psa.yaml --lever psa-blocks --data-root ../shared/data \
        --rounds 3 --set model.embedder.features.word.pretrained=null

(The H100 session's PSA figures ran as ``benchmarks/psa_gpu_blocks.py``, this script's first form;
BENCHMARKS.md, "GPU".)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from training_setup import training_setup

from seqlab.crf import crf
from seqlab.crf import partition as crf_partition
from seqlab.encoders import psa
from seqlab.training import train_step

#: lever -> (module, attribute, value off, value on)
LEVERS = {
    "psa-blocks": (psa, "GPU_BLOCK_ELEMENTS", psa.BLOCK_ELEMENTS, psa.GPU_BLOCK_ELEMENTS),
    "host-crf": (crf_partition, "GPU_ON_HOST", False, True),
    "host-viterbi": (crf, "GPU_HOST_VITERBI_ROWS", 0, 2),
}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--lever", required=True, choices=sorted(LEVERS))
    p.add_argument("--data-root")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--train-batches", type=int, default=100)
    p.add_argument("--batch-1-sentences", type=int, default=400)
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("gpu_lever_ab: no CUDA GPU")
    module, name, off, on = LEVERS[args.lever]
    setup = training_setup(args.config, args.set, args.data_root, "cuda", batches=args.train_batches)
    config, corpus, tagger, batches = setup.config, setup.corpus, setup.tagger, setup.batches
    params, optimizer = setup.params, setup.optimizer
    test = corpus.test or corpus.dev
    settings = {"off": off, "on": on}

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

    figures = {setting: {"train": [], "64": [], "1": []} for setting in settings}
    for r in range(args.rounds + 1):  # round 0 warms both up and is not counted
        order = list(settings) if r % 2 else list(reversed(settings))
        for setting in order:
            setattr(module, name, settings[setting])
            seconds = {"train": timed(training), "64": timed(tag64), "1": timed(tag1)}
            if r:
                for key, value in seconds.items():
                    figures[setting][key].append(value)
    tagger.net.eval()
    tags = {}
    for setting, value in settings.items():  # the same weights, each setting
        setattr(module, name, value)
        tags[setting] = (tagger.predict_tags(test, 64), tagger.predict_tags(test[: args.batch_1_sentences], 1))
    setattr(module, name, on)
    n = {"train": sum(len(b.index) for b in batches), "64": len(test), "1": min(len(test), args.batch_1_sentences)}
    result = {
        "config": args.config,
        "lever": args.lever,
        "switch": f"{module.__name__}.{name}",
        "values": settings,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "rounds": args.rounds,
        "sentences": n,
        "sentences_per_s": {
            setting: {k: round(n[k] / statistics.median(v), 1) for k, v in f.items()} for setting, f in figures.items()
        },
        "same_tags": tags["off"] == tags["on"],
    }
    result["on_over_off"] = {
        k: round(result["sentences_per_s"]["on"][k] / result["sentences_per_s"]["off"][k], 3) for k in n
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
