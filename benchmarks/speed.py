"""Training and inference throughput (sentences/s, tokens/s) of a config on its corpus.

    python benchmarks/speed.py configs/ner-conll2003-bilstm-crf.yaml --data-root ../shared/data \
        --threads 2 --train-batches 400 --out runs/speed-ner.json

Several configs in one run (e.g. PSA against its baseline) are measured one after the other in the
same process, on the same batches, and the output adds each one's speed relative to the first.

Training: ``--train-batches`` optimisation steps at the config's batch size (length-bucketed batches
as in training; each step is :func:`seqlab.training.train_step`: forward, backward, clipping with the
config's threshold, optimiser step). Inference: the whole test set through
``Tagger.predict_tags`` at each ``--batch-sizes`` (encoding, network, Viterbi and conversion back to
the input's scheme included), after one warm-up pass; and ("text-1") each test sentence as a raw string
through ``Tagger.predict`` one at a time (tokenizing, tags and spans included). ``--engine onnxruntime``
runs the inference figures on that engine (training is always eager PyTorch). Weights are freshly initialised:
throughput does not depend on their values. Run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch
from training_setup import training_setup

from seqlab.devices import resolve_device
from seqlab.training import train_step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("configs", nargs="+")
    p.add_argument("--data-root", default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--train-batches", type=int, default=400)
    p.add_argument("--warmup-batches", type=int, default=20, help="training steps before the clock starts")
    p.add_argument("--batch-sizes", default="1,64")
    p.add_argument(
        "--test-limit",
        type=int,
        default=0,
        help="tag only the first N test sentences (slow models); 0 = the whole test set",
    )
    p.add_argument("--no-text", action="store_true", help="skip the text-1 figure")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every config measured, as in `seqlab train --set`",
    )
    p.add_argument("--engine", default="torch", help="what runs the encoding at inference (Tagger.set_engine)")
    p.add_argument(
        "--device",
        default="cpu",
        help="cpu, cuda or auto: where the network trains and tags (the "
        "batches are moved there inside the timed loop, as in training)",
    )
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    results = [measure(path, args) for path in args.configs]
    for r in results[1:]:
        r["relative_to_first"] = {
            "train": round(r["train"]["sentences_per_s"] / results[0]["train"]["sentences_per_s"], 3),
            **{
                bs: round(v["sentences_per_s"] / results[0]["inference"][bs]["sentences_per_s"], 3)
                for bs, v in r["inference"].items()
            },
        }
    output = results[0] if len(results) == 1 else results
    print(json.dumps(output, indent=2))
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(output, f, indent=2)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def describe(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"


def measure(config_path: str, args: argparse.Namespace) -> dict:
    device = resolve_device(args.device)
    setup = training_setup(config_path, args.set, args.data_root, device, batches=args.train_batches)
    config, corpus, tagger, batches = setup.config, setup.corpus, setup.tagger, setup.batches
    net, cfg, params, optimizer = tagger.net, config.train, setup.params, setup.optimizer
    net.train()

    for batch in batches[: args.warmup_batches]:  # warm-up
        train_step(net, batch.to(device), optimizer, params, cfg)
    synchronize(device)
    start = time.perf_counter()
    for batch in batches:
        train_step(net, batch.to(device), optimizer, params, cfg)
    synchronize(device)  # a GPU's queued kernels are part of the time
    seconds = time.perf_counter() - start
    sents = sum(len(b.index) for b in batches)
    toks = sum(b.num_tokens for b in batches)
    result = {
        "config": config_path,
        "overrides": args.set,
        "threads": args.threads,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "device": describe(device),
        "machine": platform.processor() or platform.machine(),
        "parameters": sum(q.numel() for q in params),
        "train": {
            "batch_size": cfg.batch_size,
            "batches": len(batches),
            "sentences": sents,
            "tokens": toks,
            "seconds": round(seconds, 2),
            "sentences_per_s": round(sents / seconds, 1),
            "tokens_per_s": round(toks / seconds, 1),
        },
        "inference": {},
    }
    test = corpus.test or corpus.dev
    test = test[: args.test_limit] if args.test_limit > 0 else test
    net.eval()
    if args.engine != "torch":
        tagger.set_engine(args.engine)
        result["engine"] = args.engine
    test_tokens = sum(len(s) for s in test)
    for bs in (int(x) for x in args.batch_sizes.split(",")):
        tagger.predict_tags(test[:200], bs)  # warm-up
        start = time.perf_counter()
        tagger.predict_tags(test, bs)
        seconds = time.perf_counter() - start
        result["inference"][str(bs)] = {
            "sentences": len(test),
            "seconds": round(seconds, 2),
            "sentences_per_s": round(len(test) / seconds, 1),
            "tokens_per_s": round(test_tokens / seconds, 1),
        }
    if args.no_text:
        return result
    texts = [" ".join(s.tokens) for s in test]  # text in, labels and spans out: what a service sees
    for t in texts[:200]:
        tagger.predict([t], batch_size=1)  # warm-up
    start = time.perf_counter()
    for t in texts:
        tagger.predict([t], batch_size=1)
    seconds = time.perf_counter() - start
    result["inference"]["text-1"] = {
        "sentences": len(test),
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(test) / seconds, 1),
        "tokens_per_s": round(test_tokens / seconds, 1),
    }
    return result


if __name__ == "__main__":
    main()
