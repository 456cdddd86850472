"""Print the figures of finished benchmark runs (results.json, log.jsonl, speed-*.json) as Markdown rows.

    python benchmarks/summarize.py runs/bench [--at-epoch 10]

Runs named ``<setup>-seed<N>`` are also grouped per setup: mean, sample standard deviation and max of
the test metric over the seeds that finished. ``--at-epoch N`` adds, per run, the dev metric after
epoch N and the best dev metric within the first N epochs (ablations run for fewer epochs are compared
with the full runs at equal training). ``--curves`` adds, per setup, the dev metric after each epoch,
averaged over the seeds that ran that epoch.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from seqlab.config import ExperimentConfig


def _dev_curve(run_dir: Path) -> list[float]:
    """Dev metric after each epoch of one run: the metric named in results.json (finished runs; the
    session-1 results keep no config.json) or else by the run's config."""
    results = run_dir / "results.json"
    if results.exists():
        m = json.loads(results.read_text())["metric"]
    else:
        m = ExperimentConfig(**json.loads((run_dir / "config.json").read_text())).metric
    return [json.loads(x)["dev"][m] for x in (run_dir / "log.jsonl").read_text().splitlines()]


def main(root: str, at_epoch: int | None = None, curves: bool = False) -> None:
    base = Path(root)
    groups: dict[str, list[float]] = defaultdict(list)
    print("| run | metric | best epoch / epochs run | dev | test | mean train sent/s (1 thread) | train wall s |")
    print("|---|---|---|---|---|---|---|")
    for res in sorted(base.glob("*/results.json")):
        r = json.loads(res.read_text())
        log = [json.loads(x) for x in (res.parent / "log.jsonl").read_text().splitlines()]
        m = r["metric"]
        wall = sum(x["seconds"] + x["dev_seconds"] for x in log)
        print(
            f"| {res.parent.name} | {m} | {r['best_epoch']} / {r['epochs_run']} | {r['dev'][m]:.2f} | "
            f"{r['test'][m]:.2f} | {r['train_sentences_per_s']} | {wall:.0f} |"
        )
        groups[re.sub(r"-seed\d+$", "", res.parent.name)].append(r["test"][m])
    print("\n| setup | seeds | test mean | std | max |")
    print("|---|---|---|---|---|")
    for name, values in sorted(groups.items()):
        std = statistics.stdev(values) if len(values) > 1 else float("nan")
        print(f"| {name} | {len(values)} | {statistics.mean(values):.2f} | {std:.2f} | {max(values):.2f} |")
    if at_epoch:
        print(f"\n| run | dev after epoch {at_epoch} | best dev within {at_epoch} epochs |")
        print("|---|---|---|")
        for log_path in sorted(base.glob("*/log.jsonl")):
            devs = _dev_curve(log_path.parent)[:at_epoch]
            if len(devs) < at_epoch:
                continue
            print(f"| {log_path.parent.name} | {devs[-1]:.2f} | {max(devs):.2f} |")
    if curves:
        per_setup: dict[str, list[list[float]]] = defaultdict(list)
        for log_path in sorted(base.glob("*/log.jsonl")):
            per_setup[re.sub(r"-seed\d+$", "", log_path.parent.name)].append(_dev_curve(log_path.parent))
        print("\n| setup | runs | mean dev after epoch 1, 2, ... |")
        print("|---|---|---|")
        for name, runs in sorted(per_setup.items()):
            means = [statistics.mean(r[e] for r in runs if len(r) > e) for e in range(max(map(len, runs)))]
            print(f"| {name} | {len(runs)} | {' '.join(f'{v:.2f}' for v in means)} |")
    for sp in sorted(base.glob("speed-*.json")):
        data = json.loads(sp.read_text())
        for s in data if isinstance(data, list) else [data]:
            t = s["train"]
            inf = "; ".join(
                f"batch {k}: {v['sentences_per_s']} sent/s, {v['tokens_per_s']} tok/s"
                for k, v in s["inference"].items()
            )
            rel = f"; relative to the first config: {s['relative_to_first']}" if "relative_to_first" in s else ""
            sets = "".join(f" --set {o}" for o in s.get("overrides", []))
            print(
                f"\n{sp.name} {s['config']}{sets}: threads {s['threads']}, params {s['parameters']}; train (batch "
                f"{t['batch_size']}): {t['sentences_per_s']} sent/s, {t['tokens_per_s']} tok/s; inference: {inf}{rel}"
            )


if __name__ == "__main__":
    args = sys.argv[1:]
    epoch = None
    if "--at-epoch" in args:
        i = args.index("--at-epoch")
        epoch = int(args[i + 1])
        del args[i : i + 2]
    show_curves = "--curves" in args
    if show_curves:
        args.remove("--curves")
    main(args[0] if args else "runs/bench", epoch, show_curves)
