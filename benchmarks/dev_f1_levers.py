"""Dev F1 per epoch of short training runs with this session's training levers on or off, to check that a
change of rounding did not change what training learns (and how the fused SGD's stale-cache bug was found).

    python benchmarks/dev_f1_levers.py --fused 0|1 --scaled 0|1 [--rows 0|1] --seed 1 --epochs 3 --out /tmp/run \
        [--config configs/chunking-bilstm-crf.yaml] [--data-root ../shared/data] [--set KEY=VALUE ...]

``--fused``: ``seqlab.training.FUSED_SGD`` (the fused SGD taking clipping's factor, against the multi-tensor SGD
after ``clip_grad_norm_``); ``--scaled``: ``seqlab.crf_partition.CPU_SCALED`` (the CRF loss's recursions in
probability space, against log space); ``--rows``: ``seqlab.training.ROW_TABLES`` (the word table updated by
rows, seqlab.rows, against whole every step; default on). The config is trained with SGD (lr 0.015, clip 5), as the
speed rounds. Prints one line: the switches, the seed and the dev F1 after each epoch.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from seqlab import training
from seqlab.config import load_config
from seqlab.crf import partition as crf_partition
from seqlab.training import step


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--fused", type=int, choices=[0, 1], required=True)
    p.add_argument("--scaled", type=int, choices=[0, 1], required=True)
    p.add_argument("--rows", type=int, choices=[0, 1], default=1)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--config", default="configs/chunking-bilstm-crf.yaml")
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--set", action="append", default=[])
    args = p.parse_args()
    step.FUSED_SGD, crf_partition.CPU_SCALED = bool(args.fused), bool(args.scaled)
    step.ROW_TABLES = bool(args.rows)
    config = load_config(
        args.config,
        [
            "train.optimizer=sgd",
            "train.lr=0.015",
            "train.clip=5.0",
            f"train.max_epochs={args.epochs}",
            f"train.seed={args.seed}",
            *args.set,
        ],
    )
    training.train(config, args.out, args.data_root, progress=False)
    f1 = [round(json.loads(line)["dev"]["f1"], 2) for line in (Path(args.out) / "log.jsonl").open()]
    print(f"fused {args.fused} scaled {args.scaled} rows {args.rows} seed {args.seed}: dev F1 by epoch {f1}")


if __name__ == "__main__":
    main()
