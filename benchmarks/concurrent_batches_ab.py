"""Batches side by side against one after another, in one process, interleaved.

    python benchmarks/concurrent_batches_ab.py runs/speed/chunk-model/model:../shared/data/conll2000/test.txt \
        --batch-sizes 8,16,32,64 --reps 9 --threads 2

For each model and batch size, ``predict_tags`` over the whole file alternates between seqlab's inference as it
is (eager CPU batches of more than ``SMALL_BATCH`` sentences run ``threads`` at a time, one intra-op thread each:
``seqlab.devices.run_concurrently``) and the same code with that function replaced by a plain loop (each batch
on all ``threads``), ``--reps`` times each; prints sentences/s, the median of the per-repetition ratios, and
whether the two gave the same tags. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def one_after_another(fn, items, device) -> None:
    for item in items:
        fn(item)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs", nargs="+", help="MODEL:DATA (a labeled file in the model's format)")
    ap.add_argument("--batch-sizes", default="8,16,32,64")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="also write the results here (JSON)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    import seqlab.tagging.inference as tagger_module
    from seqlab.data.readers import read_bmes, read_conll
    from seqlab.tagger import Tagger

    together = tagger_module.run_concurrently
    results = []
    for pair in args.pairs:
        model, data = pair.rsplit(":", 1)
        tagger = Tagger.load(model)
        read = read_bmes if tagger.config.data.format == "bmes" else read_conll
        sentences = read(data) if read is read_bmes else read(data, label_column=tagger.config.data.label_column)
        for bs in (int(x) for x in args.batch_sizes.split(",")):
            rates: dict[str, list[float]] = {"together": [], "one_by_one": []}
            tags = {}
            tagger.predict_tags(sentences[:200], bs)  # warm-up
            for _ in range(args.reps):
                for name, fn in (("one_by_one", one_after_another), ("together", together)):
                    tagger_module.run_concurrently = fn
                    start = time.perf_counter()
                    tags[name] = tagger.predict_tags(sentences, bs)
                    rates[name].append(len(sentences) / (time.perf_counter() - start))
            tagger_module.run_concurrently = together
            ratio = statistics.median(a / b for a, b in zip(rates["together"], rates["one_by_one"]))
            row = {
                "model": model,
                "batch_size": bs,
                "sentences": len(sentences),
                "one_by_one": [round(x) for x in rates["one_by_one"]],
                "together": [round(x) for x in rates["together"]],
                "median_one_by_one": round(statistics.median(rates["one_by_one"])),
                "median_together": round(statistics.median(rates["together"])),
                "ratio": round(ratio, 3),
                "same_tags": tags["together"] == tags["one_by_one"],
            }
            results.append(row)
            print(
                f"{model} batch {bs}: one by one {row['median_one_by_one']}, together {row['median_together']} "
                f"sentences/s, ratio {row['ratio']}, same tags {row['same_tags']}",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"threads": args.threads, "reps": args.reps, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
