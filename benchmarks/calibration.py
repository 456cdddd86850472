"""Calibration of span and token confidences: expected calibration error (ECE) on a labelled file.

    python benchmarks/calibration.py MODEL DATA [--bins 10]

A predicted span counts as correct when the gold file has the same span (start, end, type); a token when its
predicted label equals the gold one. ECE = sum over equal-width confidence bins of (bin share) x |mean
confidence - accuracy|. Prints a markdown table of the bins and the ECE of spans and tokens.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def ece(pairs: list[tuple[float, bool]], bins: int) -> tuple[float, list[tuple[int, float, float]]]:
    """(ECE, [(count, mean confidence, accuracy) per bin])."""
    table = []
    total = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pairs if lo < c <= hi or (b == 0 and c == 0)]
        if not inside:
            table.append((0, 0.0, 0.0))
            continue
        conf = sum(c for c, _ in inside) / len(inside)
        acc = sum(ok for _, ok in inside) / len(inside)
        total += len(inside) / len(pairs) * abs(conf - acc)
        table.append((len(inside), conf, acc))
    return total, table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--bins", type=int, default=10)
    args = parser.parse_args()
    from seqlab.data.schemes import get_spans
    from seqlab.tagger import Tagger
    tagger = Tagger.load(args.model)
    reader = "bmes" if tagger.config.data.format == "bmes" else "conll"
    from seqlab.data.corpus import read_file
    sentences = read_file(Path(args.data), tagger.config.data)
    preds = tagger.predict(sentences, confidence=True)
    spans, tokens = [], []
    for s, p in zip(sentences, preds):
        gold = set(get_spans(s.labels, tagger.scheme))
        spans += [(sp.confidence, (sp.type, sp.start, sp.end) in gold) for sp in p.spans]
        tokens += [(c, t == g) for c, t, g in zip(p.token_confidence, p.tags, s.labels)]
    print(f"model {args.model} ({tagger.config.model.decoder.type} decoder, {preds[0].confidence_kind}); "
          f"data {args.data} ({reader}, {len(sentences)} sentences)\n")
    for name, pairs in (("spans", spans), ("tokens", tokens)):
        value, table = ece(pairs, args.bins)
        print(f"{name}: {len(pairs)}, accuracy {sum(ok for _, ok in pairs) / len(pairs):.4f}, "
              f"mean confidence {sum(c for c, _ in pairs) / len(pairs):.4f}, **ECE {value:.4f}**\n")
        print("| bin | count | mean confidence | accuracy |\n|---|---|---|---|")
        for b, (n, conf, acc) in enumerate(table):
            if n:
                print(f"| {b / args.bins:.1f}-{(b + 1) / args.bins:.1f} | {n} | {conf:.3f} | {acc:.3f} |")
        print()


if __name__ == "__main__":
    main()
