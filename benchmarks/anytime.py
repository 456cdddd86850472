"""Anytime curves and recipe tables of finished (or running) training runs.

    python benchmarks/anytime.py RUN_DIR [RUN_DIR ...] [--png curves.png] [--title TEXT]

For each run folder: its recipe (optimiser, rate, schedule, batch, budget, from config.json), the dev metric at each
scoring against wall-clock minutes (log.jsonl's ``elapsed``; runs logged before it was recorded are timed by the
sum of their training and scoring seconds), the best dev, the test score of results.json (a run still going has
none yet) and its wall time. Prints one Markdown row per run; ``--png`` draws dev against minutes, one line per run,
with each finished run's test score as a star at its end.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _records(run: Path) -> list[dict]:
    log = run / "log.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    out, clock = [], 0.0
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a run being written
            continue
        clock += record.get("seconds", 0.0) + record.get("dev_seconds", 0.0)
        record.setdefault("elapsed", round(clock, 1))
        out.append(record)
    return out


def _recipe(run: Path) -> str:
    train = json.loads((run / "config.json").read_text())["train"]
    parts = [f"{train['optimizer']} {train['lr']:g}", train.get("lr_schedule", "inverse_time")]
    if train.get("warmup_fraction"):
        parts.append(f"warm-up {train['warmup_fraction']:g}")
    elif train.get("warmup_epochs"):
        parts.append(f"warm-up {train['warmup_epochs']:g} ep")
    parts.append(f"batch {train['batch_tokens']} tok" if train.get("batch_tokens") else f"batch {train['batch_size']}")
    if train.get("budget"):
        parts.append(f"budget {train['budget']}")
    return ", ".join(parts)


def summarize(runs: list[Path]) -> list[dict]:
    rows = []
    for run in runs:
        records = _records(run)
        if not records:
            continue
        results = json.loads((run / "results.json").read_text()) if (run / "results.json").exists() else None
        metric = results["metric"] if results else next(k for k in ("f1", "accuracy") if k in records[0]["dev"])
        rows.append(
            {
                "run": run.name,
                "recipe": _recipe(run),
                "metric": metric,
                "records": records,
                "best_dev": max(r["dev"][metric] for r in records),
                "test": results["test"][metric] if results and results.get("test") else None,
                "epochs": records[-1]["epoch"],
                "minutes": (results.get("elapsed_s") or records[-1]["elapsed"]) / 60
                if results
                else records[-1]["elapsed"] / 60,
            }
        )
    return rows


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    for row in rows:
        minutes = [r["elapsed"] / 60 for r in row["records"]]
        (line,) = ax.plot(minutes, [r["dev"][row["metric"]] for r in row["records"]], marker=".", label=row["run"])
        if row["test"] is not None:
            ax.plot([row["minutes"]], [row["test"]], marker="*", ms=12, color=line.get_color())
    ax.set(xlabel="wall-clock minutes", ylabel="dev (lines) / test (stars)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(path, dpi=110, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--png", type=Path)
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    rows = summarize(sorted(args.runs))
    print("| run | recipe | epochs | best dev | test | minutes |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        test = "running" if row["test"] is None else f"{row['test']:.2f}"
        print(
            f"| {row['run']} | {row['recipe']} | {row['epochs']} | {row['best_dev']:.2f} | {test} | "
            f"{row['minutes']:.1f} |"
        )
    if args.png:
        plot(rows, args.png, args.title)


if __name__ == "__main__":
    main()
