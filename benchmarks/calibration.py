"""Calibration of span and token confidences: expected calibration error (ECE) on a labelled file.

    python benchmarks/calibration.py MODEL DATA [--bins 10]

A predicted span counts as correct when the gold file has the same span (start, end, type); a token when its
predicted label equals the gold one. ECE = sum over equal-width confidence bins of (bin share) x |mean
confidence - accuracy|. Prints a markdown table of the bins and the ECE of spans and tokens
(:func:`seqlab.calibration.reliability`). A model calibrated by ``seqlab calibrate`` is measured at its fitted
temperature.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--bins", type=int, default=10)
    args = parser.parse_args()
    from seqlab.calibration import reliability
    from seqlab.data.corpus import read_file
    from seqlab.tagger import Tagger

    tagger = Tagger.load(args.model)
    reader = "bmes" if tagger.config.data.format == "bmes" else "conll"
    sentences = read_file(Path(args.data), tagger.config.data)
    result = reliability(tagger, sentences, args.bins)
    decoder = tagger.config.model.decoder
    print(
        f"model {args.model} ({decoder.type} decoder, temperature {getattr(decoder, 'temperature', 1.0):.4g}); "
        f"data {args.data} ({reader}, {len(sentences)} sentences)\n"
    )
    for name in ("spans", "tokens"):
        ece = getattr(result, name)
        if not ece.items:
            continue
        right = sum(b.count * b.accuracy for b in ece.bins) / ece.items
        mean = sum(b.count * b.confidence for b in ece.bins) / ece.items
        print(f"{name}: {ece.items}, accuracy {right:.4f}, mean confidence {mean:.4f}, **ECE {ece.value:.4f}**\n")
        print("| bin | count | mean confidence | accuracy |\n|---|---|---|---|")
        for b, row in enumerate(ece.bins):
            if row.count:
                print(
                    f"| {b / args.bins:.1f}-{(b + 1) / args.bins:.1f} | {row.count} | {row.confidence:.3f} | "
                    f"{row.accuracy:.3f} |"
                )
        print()


if __name__ == "__main__":
    main()
