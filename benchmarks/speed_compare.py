"""seqlab against an earlier commit of itself: ``benchmarks/speed.py`` run alternately on two checkouts.

    git worktree add /tmp/base 5029c77
    python benchmarks/speed_compare.py --base /tmp/base --new . --reps 3 --data-root ../shared/data \
        --out runs/speed-compare.json -- configs/chunking-bilstm-crf.yaml --train-batches 300

Each repetition runs the base checkout, then the new one (one process each, nothing else in parallel),
with this file's copy of ``speed.py`` and ``PYTHONPATH`` set to the checkout, so both are measured by
the same code; the report gives each figure's median over the repetitions and new / base. Arguments
after ``--`` go to ``speed.py``; ``--data-root`` is made absolute for both.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SPEED = Path(__file__).resolve().parent / "speed.py"


def run(tree: Path, args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "speed.json"
        env = {**os.environ, "PYTHONPATH": str(tree)}
        subprocess.run(
            [sys.executable, str(SPEED), *args, "--out", str(out)],
            cwd=tree,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return json.loads(out.read_text())


def figures(result: dict | list[dict]) -> dict[str, float]:
    """speed.py's output -> figure name -> sentences/s; several configs in one run (a list) are named by config."""
    if isinstance(result, list):
        return {f"{Path(r['config']).stem}: {k}": v for r in result for k, v in figures(r).items()}
    out = {"train": result["train"]["sentences_per_s"]}
    out.update({f"inference {bs}": v["sentences_per_s"] for bs, v in result["inference"].items()})
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--base", required=True, help="checkout of the earlier commit")
    p.add_argument("--new", default=".", help="checkout measured against it")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--data-root", required=True)
    p.add_argument("--out")
    p.add_argument(
        "--new-extra", default="", help="speed.py arguments for the new checkout only, e.g. '--engine onnxruntime'"
    )
    p.add_argument("speed_args", nargs=argparse.REMAINDER, help="-- then speed.py's arguments")
    args = p.parse_args()
    speed_args = [a for a in args.speed_args if a != "--"]
    speed_args += ["--data-root", str(Path(args.data_root).resolve())]
    trees = {"base": Path(args.base).resolve(), "new": Path(args.new).resolve()}
    runs: dict[str, list[dict[str, float]]] = {"base": [], "new": []}
    for rep in range(args.reps):
        for name, tree in trees.items():
            extra = args.new_extra.split() if name == "new" else []
            runs[name].append(figures(run(tree, speed_args + extra)))
            print(f"rep {rep + 1} {name}: {runs[name][-1]}", flush=True)
    report = {
        "speed_args": speed_args,
        "new_extra": args.new_extra,
        "reps": args.reps,
        "trees": {k: str(v) for k, v in trees.items()},
        "runs": runs,
        "median": {},
        "new_over_base": {},
    }
    for key in runs["base"][0]:
        base = statistics.median(r[key] for r in runs["base"])
        new = statistics.median(r[key] for r in runs["new"])
        report["median"][key] = {"base": base, "new": new}
        report["new_over_base"][key] = round(new / base, 3)
    print(json.dumps({"median": report["median"], "new_over_base": report["new_over_base"]}, indent=2))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
