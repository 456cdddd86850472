"""Print the figures of finished benchmark runs (results.json, log.jsonl, speed-*.json) as Markdown rows.

    python benchmarks/summarize.py runs/bench
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(root: str) -> None:
    base = Path(root)
    print("| run | metric | best epoch / epochs run | dev | test | mean train sent/s (1 thread) | train wall s |")
    print("|---|---|---|---|---|---|---|")
    for res in sorted(base.glob("*/results.json")):
        r = json.loads(res.read_text())
        log = [json.loads(x) for x in (res.parent / "log.jsonl").read_text().splitlines()]
        m = r["metric"]
        wall = sum(x["seconds"] + x["dev_seconds"] for x in log)
        print(f"| {res.parent.name} | {m} | {r['best_epoch']} / {r['epochs_run']} | {r['dev'][m]:.2f} | "
              f"{r['test'][m]:.2f} | {r['train_sentences_per_s']} | {wall:.0f} |")
    for sp in sorted(base.glob("speed-*.json")):
        s = json.loads(sp.read_text())
        t = s["train"]
        inf = "; ".join(f"batch {k}: {v['sentences_per_s']} sent/s, {v['tokens_per_s']} tok/s"
                        for k, v in s["inference"].items())
        print(f"\n{sp.name}: threads {s['threads']}, params {s['parameters']}; train (batch {t['batch_size']}): "
              f"{t['sentences_per_s']} sent/s, {t['tokens_per_s']} tok/s; inference: {inf}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/bench")
