"""Predicted tags of trained models on whole test sets at batch 1 and 64, for comparing two checkouts.

    PYTHONPATH=/tmp/base python benchmarks/same_tags.py --out /tmp/tags-base.json MODEL:DATA ...
    PYTHONPATH=.         python benchmarks/same_tags.py --out /tmp/tags-new.json MODEL:DATA ...
    PYTHONPATH=.         python benchmarks/same_tags.py --engine auto --out /tmp/tags-auto.json MODEL:DATA ...
    python benchmarks/same_tags.py --compare /tmp/tags-base.json /tmp/tags-new.json

DATA is a labeled file in the model's format (conll or bmes). The comparison counts sentences and
tokens whose tags differ between the two files, per model and batch size, and between batch sizes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def predict(pairs: list[str], engine: str = "torch") -> dict:
    from seqlab.data.readers import read_bmes, read_conll
    from seqlab.tagger import Tagger

    out = {}
    for pair in pairs:
        model, data = pair.rsplit(":", 1)
        tagger = Tagger.load(model, engine=engine) if engine != "torch" else Tagger.load(model)
        if tagger.config.data.format == "bmes":
            sentences = read_bmes(data)
        else:
            sentences = read_conll(data, label_column=tagger.config.data.label_column)
        out[pair] = {str(bs): tagger.predict_tags(sentences, bs) for bs in (1, 64)}
    return out


def compare(a: dict, b: dict) -> dict:
    """The two files' MODEL:DATA entries are matched in order: the same models given as paths relative to
    two different checkouts (or one relative, one absolute) still compare."""
    if len(a) != len(b):
        raise SystemExit(f"the files hold {len(a)} and {len(b)} MODEL:DATA entries: run both with the same list")
    report = {}
    for pair, other in zip(a, b):
        row = {}
        for bs in a[pair]:
            diff = [(x, y) for x, y in zip(a[pair][bs], b[other][bs]) if x != y]
            row[f"batch {bs}: sentences differing"] = len(diff)
            row[f"batch {bs}: tokens differing"] = sum(u != v for x, y in diff for u, v in zip(x, y))
        row["sentences"] = len(a[pair]["1"])
        row["batch 1 vs 64 (second file)"] = sum(x != y for x, y in zip(b[other]["1"], b[other]["64"]))
        report[pair] = row
    return report


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("pairs", nargs="*", help="MODEL:DATA")
    p.add_argument("--out")
    p.add_argument("--compare", nargs=2)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--engine", default="torch", help="torch, onnxruntime or auto (Tagger.set_engine)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    if args.compare:
        a, b = (json.loads(Path(f).read_text()) for f in args.compare)
        print(json.dumps(compare(a, b), indent=2))
        return
    result = predict(args.pairs, args.engine)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f)
    else:
        json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
