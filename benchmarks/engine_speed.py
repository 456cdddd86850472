"""Inference speed of a trained model on each engine (eager PyTorch, onnxruntime, auto), same process, alternating.

    python benchmarks/engine_speed.py MODEL DATA [--threads 2] [--reps 3] [--batch-sizes 1,64]

Loads MODEL three times (``--engine torch``, ``onnxruntime`` and ``auto``), checks that all give the same tags
on DATA (CoNLL columns, or BMES for character models) at batch 64 and at batch 1, then times
``Tagger.predict_tags`` at each of ``--batch-sizes`` and ("text-1") each sentence as a raw string through
``Tagger.predict`` one at a time (tokenizing, tags and spans included), repetitions alternating, and prints
the medians in sentences/s. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--batch-sizes", default="1,64", help="comma-separated batch sizes to time")
    args = parser.parse_args()
    import torch

    from seqlab.data.corpus import read_file
    from seqlab.tagger import Tagger

    torch.set_num_threads(args.threads)
    eager = Tagger.load(args.model)
    sentences = read_file(Path(args.data), eager.config.data, labeled=False)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    taggers = {"torch": eager, **{name: Tagger.load(args.model, engine=name) for name in ("onnxruntime", "auto")}}
    texts = [" ".join(s.tokens) for s in sentences]
    expected = taggers["torch"].predict_tags(sentences)
    same = all(t.predict_tags(sentences, b) == expected for t in list(taggers.values())[1:] for b in (64, 1))
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.reps):
        for name, tagger in taggers.items():
            for batch in sizes:
                start = time.perf_counter()
                tagger.predict_tags(sentences, batch)
                times.setdefault((name, str(batch)), []).append(len(sentences) / (time.perf_counter() - start))
            start = time.perf_counter()
            for text in texts:
                tagger.predict(text)
            times.setdefault((name, "text-1"), []).append(len(texts) / (time.perf_counter() - start))
    print(
        f"{args.model} on {args.data}: {len(sentences)} sentences, {args.threads} threads, "
        f"onnxruntime and auto tags identical to torch at batch 64 and 1: {same}"
    )
    keys = [*map(str, sizes), "text-1"]
    print(f"| engine | {' | '.join(f'batch {k}' for k in keys[:-1])} | text-1 | (sentences/s, medians; runs) |")
    print("|---" * (len(keys) + 2) + "|")
    for name in taggers:
        cells = [f"{statistics.median(times[(name, k)]):.0f}" for k in keys]
        runs = "; ".join(f"{k}: " + ", ".join(f"{v:.0f}" for v in times[(name, k)]) for k in keys)
        print(f"| {name} | {' | '.join(cells)} | {runs} |")


if __name__ == "__main__":
    main()
