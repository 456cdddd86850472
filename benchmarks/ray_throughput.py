"""Throughput of tagging through Ray Data (``seqlab.integrations.ray``) with 1 and 2 Ray workers.

    python benchmarks/ray_throughput.py MODEL [--data ../shared/data/conll2000/test.txt] [--sentences N]
        [--repeat K] [--workers 1,2] [--batch-size 256] [--out runs/ray-throughput.json]

Reads the token column of a CoNLL file (CoNLL-2000 test: 2,012 sentences), repeats it ``--repeat`` times and
keeps the first ``--sentences``, starts a local Ray with as many CPUs as the largest worker count (no
dashboard), and for each worker count tags the whole dataset with ``ds.map_batches(SeqlabPredictor, ...)``
on a pool of that many actors (one CPU each: Ray sets ``OMP_NUM_THREADS=1``), timed until every block is
materialized in the object store. The time includes starting the actors (each imports PyTorch and loads the
model, a few seconds): tag enough sentences (``--repeat``) for that to be small. Also prints, as a reference,
``Tagger.predict`` in this process on one thread without Ray, and checks that every worker count gave
the same tags. Run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "conll2000" / "test.txt"))
    p.add_argument("--sentences", type=int, help="tag this many (default: all, times --repeat)")
    p.add_argument("--repeat", type=int, default=1, help="the file this many times over")
    p.add_argument("--workers", default="1,2", help="comma-separated Ray worker counts")
    p.add_argument("--batch-size", type=int, default=256, help="rows per map_batches call")
    p.add_argument("--out", help="also write the results as JSON")
    args = p.parse_args()

    import torch

    from seqlab import Tagger
    from seqlab.data.readers import read_conll

    sentences = [s.tokens for s in read_conll(args.data, label_column=None)] * args.repeat
    sentences = sentences[: args.sentences] if args.sentences else sentences
    workers = [int(w) for w in args.workers.split(",")]
    tokens = sum(map(len, sentences))
    print(f"{len(sentences)} sentences, {tokens} tokens from {args.data}; model {args.model}")

    torch.set_num_threads(1)
    tagger = Tagger.load(args.model)
    tagger.predict(sentences[:64])  # warm-up
    start = time.perf_counter()
    reference = [p.tags for p in tagger.predict(sentences)]  # the predictor's work: tags and spans
    seconds = time.perf_counter() - start
    results = [
        {"setting": "in-process, 1 thread, no Ray", "seconds": seconds, "sentences_per_s": len(sentences) / seconds}
    ]

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    import ray.data

    from seqlab.integrations.ray import tag_dataset

    ray.init(num_cpus=max(workers), include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        items = [{"id": i, "tokens": t} for i, t in enumerate(sentences)]
        for n in workers:
            deadline = time.monotonic() + 120
            while ray.available_resources().get("CPU", 0) < n and time.monotonic() < deadline:
                time.sleep(0.2)  # the previous run's actors are still being stopped: not in this run's time
            ds = ray.data.from_items(items)
            start = time.perf_counter()
            done = tag_dataset(ds, args.model, concurrency=n, batch_size=args.batch_size).materialize()
            seconds = time.perf_counter() - start
            rows = sorted(done.take_all(), key=lambda r: r["id"])  # read from the object store: no new tasks
            same = [list(r["tags"]) for r in rows] == reference
            del done, rows  # frees the blocks (and the pool's actors) before the next run
            results.append(
                {
                    "setting": f"Ray Data, {n} worker{'s' if n > 1 else ''}",
                    "seconds": seconds,
                    "sentences_per_s": len(sentences) / seconds,
                    "same_tags_as_in_process": same,
                }
            )
    finally:
        ray.shutdown()

    print(f"{'setting':34} {'seconds':>8} {'sentences/s':>12}  same tags")
    for r in results:
        print(
            f"{r['setting']:34} {r['seconds']:8.2f} {r['sentences_per_s']:12.1f}  "
            f"{r.get('same_tags_as_in_process', '-')}"
        )
    if args.out:
        from seqlab.io import atomic_write_json

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            args.out,
            {
                "model": args.model,
                "data": args.data,
                "sentences": len(sentences),
                "tokens": tokens,
                "batch_size": args.batch_size,
                "cpus": os.cpu_count(),
                "machine": platform.processor() or platform.machine(),
                "ray": ray.__version__,
                "results": results,
            },
        )


if __name__ == "__main__":
    main()
