"""Print the figures of finished benchmark runs (results.json, log.jsonl, speed-*.json) as Markdown rows.

    python benchmarks/summarize.py runs/bench

Runs named ``<setup>-seed<N>`` are also grouped per setup: mean, sample standard deviation and max of
the test metric over the seeds that finished.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path


def main(root: str) -> None:
    base = Path(root)
    groups: dict[str, list[float]] = defaultdict(list)
    print("| run | metric | best epoch / epochs run | dev | test | mean train sent/s (1 thread) | train wall s |")
    print("|---|---|---|---|---|---|---|")
    for res in sorted(base.glob("*/results.json")):
        r = json.loads(res.read_text())
        log = [json.loads(x) for x in (res.parent / "log.jsonl").read_text().splitlines()]
        m = r["metric"]
        wall = sum(x["seconds"] + x["dev_seconds"] for x in log)
        print(f"| {res.parent.name} | {m} | {r['best_epoch']} / {r['epochs_run']} | {r['dev'][m]:.2f} | "
              f"{r['test'][m]:.2f} | {r['train_sentences_per_s']} | {wall:.0f} |")
        groups[re.sub(r"-seed\d+$", "", res.parent.name)].append(r["test"][m])
    print("\n| setup | seeds | test mean | std | max |")
    print("|---|---|---|---|---|")
    for name, values in sorted(groups.items()):
        std = statistics.stdev(values) if len(values) > 1 else float("nan")
        print(f"| {name} | {len(values)} | {statistics.mean(values):.2f} | {std:.2f} | {max(values):.2f} |")
    for sp in sorted(base.glob("speed-*.json")):
        data = json.loads(sp.read_text())
        for s in data if isinstance(data, list) else [data]:
            t = s["train"]
            inf = "; ".join(f"batch {k}: {v['sentences_per_s']} sent/s, {v['tokens_per_s']} tok/s"
                            for k, v in s["inference"].items())
            rel = f"; relative to the first config: {s['relative_to_first']}" if "relative_to_first" in s else ""
            print(f"\n{sp.name} {s['config']}: threads {s['threads']}, params {s['parameters']}; train (batch "
                  f"{t['batch_size']}): {t['sentences_per_s']} sent/s, {t['tokens_per_s']} tok/s; inference: {inf}{rel}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/bench")
