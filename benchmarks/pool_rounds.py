"""Pool the processes of several speed_compare.py rounds: each side's median over every process of the rounds
given, and the new / base ratio of those medians, per figure.

    python benchmarks/pool_rounds.py benchmarks/results/speed/chunker-vs-5029c77/session20-round*-sgd.json

Prints one line per figure: processes a side, base and new medians (sentences/s), the ratio, and each round's own
ratio of medians.
"""

from __future__ import annotations

import json
import statistics
import sys


def main() -> None:
    rounds = []
    for path in sys.argv[1:]:
        with open(path) as f:
            rounds.append(json.load(f))
    if not rounds:
        sys.exit("usage: pool_rounds.py ROUND.json [ROUND.json ...]")
    figures = list(rounds[0]["runs"]["base"][0])
    for figure in figures:
        sides = {
            side: [run[figure] for r in rounds for run in r["runs"][side] if figure in run] for side in ("base", "new")
        }
        base, new = (statistics.median(sides[s]) for s in ("base", "new"))
        each = [round(r["new_over_base"][figure], 2) for r in rounds if figure in r["new_over_base"]]
        print(
            f"{figure}: {len(sides['base'])} a side, base {base:,.1f}, new {new:,.1f}, "
            f"new / base {new / base:.2f}; by round {each}"
        )


if __name__ == "__main__":
    main()
