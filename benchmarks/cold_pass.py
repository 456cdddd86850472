"""The first pass over new text against later passes, for two checkouts, in processes alternated.

    git worktree add /tmp/prev 5140bcb
    python benchmarks/cold_pass.py --base /tmp/prev --new . --reps 7 \
        --model runs/speed/chunk-model/model --data ../shared/data/conll2000/test.txt \
        --train ../shared/data/conll2000/train.txt --out benchmarks/results/cold-pass.json

``benchmarks/speed.py`` times one pass at batch 64 right after training: the char memo and the featurizers'
memos hold nothing of the test set but its first 200 sentences (the warm-up), and every new (batch, length) shape
of the LSTM costs oneDNN a new primitive. This measures that pass ("cold") and the ``--warm`` passes after it, as
speed.py's setting has them: each repetition runs one process per checkout (base, then new; ``sys.path`` puts
the checkout first, checked), which loads the model, encodes ``--train`` (the featurizers' memos as after
training), tags the whole file at batch 1 on ``--engine`` (``auto``: onnxruntime, so the eager char memo stays
empty, as in speed.py), tags its first 200 sentences at ``--batch-size``, then times the whole file at that
size ``1 + --warm`` times. Prints and writes each pass's medians (sentences/s) and new / base. Run nothing else
meanwhile.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def child(args: argparse.Namespace) -> None:
    tree = str(Path(args.child).resolve())
    sys.path.insert(0, tree)
    import torch

    import seqlab

    assert seqlab.__file__.startswith(tree), f"seqlab imported from {seqlab.__file__}, not {tree}"
    from seqlab.data.readers import read_conll
    from seqlab.tagger import Tagger

    torch.set_num_threads(args.threads)
    tagger = Tagger.load(args.model)
    column = tagger.config.data.label_column
    test = read_conll(args.data, label_column=column)
    if args.train:
        tagger.encode(read_conll(args.train, label_column=column))
    if args.engine != "torch":
        tagger.set_engine(args.engine)
    tagger.predict_tags(test, 1)
    tagger.predict_tags(test[:200], args.batch_size)
    passes = []
    for _ in range(1 + args.warm):
        start = time.perf_counter()
        tagger.predict_tags(test, args.batch_size)
        passes.append(len(test) / (time.perf_counter() - start))
    print(json.dumps(passes))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", help="checkout of the earlier commit")
    p.add_argument("--new", default=".", help="checkout measured against it")
    p.add_argument("--model", required=True)
    p.add_argument("--data", required=True, help="labeled file (conll) to tag")
    p.add_argument("--train", help="file whose tokens fill the featurizers' memos first, as training does")
    p.add_argument("--engine", default="auto", help="what tags the batch-1 pass (the batch-size passes: eager)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--warm", type=int, default=2, help="passes after the first")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    forwarded = [
        "--model",
        args.model,
        "--data",
        args.data,
        "--engine",
        args.engine,
        "--batch-size",
        str(args.batch_size),
        "--warm",
        str(args.warm),
        "--threads",
        str(args.threads),
    ]
    forwarded += ["--train", args.train] if args.train else []
    runs: dict[str, list[list[float]]] = {"base": [], "new": []}
    for rep in range(args.reps):
        for name in ("base", "new"):
            tree = getattr(args, name)
            out = subprocess.run(
                [sys.executable, __file__, "--child", tree, *forwarded], check=True, capture_output=True, text=True
            ).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
            print(f"rep {rep + 1} {name}: {[round(x) for x in runs[name][-1]]}", flush=True)
    labels = ["cold"] + [f"warm {k + 1}" for k in range(args.warm)]
    median = {
        label: {name: round(statistics.median(r[k] for r in runs[name])) for name in runs}
        for k, label in enumerate(labels)
    }
    report = {
        "args": vars(args),
        "runs": runs,
        "median": median,
        "new_over_base": {label: round(m["new"] / m["base"], 3) for label, m in median.items()},
    }
    print(json.dumps({"median": median, "new_over_base": report["new_over_base"]}, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
