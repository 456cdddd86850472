"""Bulk tagging with the whole heap seen by the garbage collector (A) against frozen after loading (B).

    python benchmarks/gc_freeze_ab.py MODEL TEXT_FILE [--engine onnxruntime] [--threads 1] [--reps 4] [--batch 256]

TEXT_FILE: raw text, one sentence per line, repeated to 2,048 sentences. Each repetition tags them twice, text
in and ``Prediction.to_dict`` out in chunks of ``--batch`` as the server does, once with ``gc.unfreeze()`` (A)
and once after ``gc.freeze()`` (B, what :func:`seqlab.heap.freeze_loaded` does), alternating which goes first.
Prints sentences/s and, from ``gc.callbacks``, the collections of each generation and the seconds they took.
Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from pathlib import Path

import torch

from seqlab import Tagger


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("text")
    p.add_argument("--engine", default="onnxruntime")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reps", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    texts = [ln.strip() for ln in Path(args.text).read_text(encoding="utf-8").splitlines() if ln.strip()]
    texts = (texts * (1 + 2048 // len(texts)))[:2048]
    tagger = Tagger.load(args.model, engine=args.engine)

    def work() -> None:
        for k in range(0, len(texts), args.batch):
            [q.to_dict() for q in tagger.predict(texts[k : k + args.batch], batch_size=args.batch)]

    work()  # warm-up
    print(f"objects the collector tracks after loading: {len(gc.get_objects()):,}")
    events: list[list] = []

    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            events.append([time.perf_counter(), info["generation"]])
        else:
            events[-1][0] = time.perf_counter() - events[-1][0]

    gc.callbacks.append(on_gc)
    rates: dict[str, list[float]] = {"A": [], "B": []}
    for rep in range(args.reps):
        for version in ("A", "B") if rep % 2 == 0 else ("B", "A"):
            (gc.freeze if version == "B" else gc.unfreeze)()
            events.clear()
            start = time.perf_counter()
            work()
            rate = len(texts) / (time.perf_counter() - start)
            rates[version].append(round(rate))
            count, seconds = [0, 0, 0], [0.0, 0.0, 0.0]
            for took, generation in events:
                count[generation] += 1
                seconds[generation] += took
            print(
                f"rep {rep + 1} {version}: {rate:,.0f} sentences/s; collections of generations 0/1/2 {count}, "
                f"seconds {[round(s, 4) for s in seconds]}"
            )
    gc.callbacks.remove(on_gc)
    print(
        f"A (unfrozen) {rates['A']}, B (frozen) {rates['B']}; ratio of medians B / A "
        f"{statistics.median(rates['B']) / statistics.median(rates['A']):.3f}"
    )


if __name__ == "__main__":
    main()
