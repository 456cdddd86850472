"""Training speed of data-parallel processes (``seqlab train --nproc``) against one process.

    python benchmarks/ddp_speed.py configs/chunking-bilstm-crf.yaml --data-root ../shared/data \
        --epochs 1 --out runs/ddp-speed.json

Trains the config for ``--epochs`` epochs once per setup, one ``seqlab train`` command after the other, on
the CPU: 1 process x 2 threads (the whole 2-core machine to one process), 1 process x 1 thread, and
2 processes x 1 thread each (``--nproc 2``; ``--setups`` takes others, PROCESSESxTHREADS). Every setup
trains on the same batches (``train.batch_size`` is the batch of one update whatever the number of
processes), with the same updates but for dropout masks. Reported per setup: training sentences/s as log.jsonl
gives it (the epoch's sentences over the seconds of its training steps, all processes together; dev
scoring and start-up left out), the mean over the epochs, and the wall seconds of the whole command;
then each setup's speed relative to the first. ``--sentences N`` trains on the first N sentences only
(``data.max_train_sentences``). Run nothing else on the machine meanwhile.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("config")
    p.add_argument("--data-root", default=None)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--sentences", type=int, help="train on the first N training sentences only")
    p.add_argument("--setups", default="1x2,1x1,2x1", help="PROCESSESxTHREADS, comma-separated")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config override for every setup, as in `seqlab train --set`",
    )
    p.add_argument("--runs", help="keep the output folders here (default: a temporary folder)")
    p.add_argument("--out", help="also write the results as JSON")
    args = p.parse_args()
    setups = [tuple(int(x) for x in s.split("x")) for s in args.setups.split(",")]
    with tempfile.TemporaryDirectory(prefix="ddp-speed-") as tmp:
        runs = Path(args.runs or tmp)
        results = [measure(args, nproc, threads, runs / f"{nproc}x{threads}") for nproc, threads in setups]
    for r in results:
        r["relative_to_first"] = round(r["sentences_per_s"] / results[0]["sentences_per_s"], 3)
    output = {
        "config": args.config,
        "epochs": args.epochs,
        "sentences": args.sentences,
        "overrides": args.set,
        "cpu_count": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "setups": results,
    }
    print(f"{'processes':>9} {'threads':>7} {'sentences/s':>11} {'relative':>8} {'wall s':>7}")
    for r in results:
        print(
            f"{r['processes']:>9} {r['threads_per_process']:>7} {r['sentences_per_s']:>11.1f} "
            f"{r['relative_to_first']:>8.3f} {r['wall_seconds']:>7.1f}"
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(output, indent=2) + "\n", encoding="utf-8")


def measure(args: argparse.Namespace, nproc: int, threads: int, out: Path) -> dict:
    overrides = [f"train.threads={threads}", "train.device=cpu", *args.set]
    if args.sentences:
        overrides.append(f"data.max_train_sentences={args.sentences}")
    command = [
        sys.executable,
        "-m",
        "seqlab",
        "-q",
        "train",
        args.config,
        "--out",
        str(out),
        "--max-epochs",
        str(args.epochs),
        "--nproc",
        str(nproc),
    ]
    for item in overrides:
        command += ["--set", item]
    if args.data_root:
        command += ["--data-root", args.data_root]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"{nproc}x{threads}: seqlab train failed ({proc.returncode}): {proc.stderr.strip()}")
    log = [json.loads(line) for line in (out / "log.jsonl").read_text(encoding="utf-8").splitlines()]
    return {
        "processes": nproc,
        "threads_per_process": threads,
        "sentences_per_s": round(statistics.fmean(r["sentences_per_s"] for r in log), 1),
        "train_seconds_per_epoch": round(statistics.fmean(r["seconds"] for r in log), 2),
        "final_loss": log[-1]["loss"],
        "wall_seconds": round(wall, 1),
    }


if __name__ == "__main__":
    main()
