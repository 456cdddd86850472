"""Beam size against F1 and speed for a trained beam-search model (GCDT's label decoder; issue 11).

    python benchmarks/beam_effect.py runs/gcdt/chunking-gcdt-seed1/model ../shared/data/conll2000/test.txt \
        --beams 1,4,8 --threads 2 --out benchmarks/results/gcdt/beam-effect.json

For each beam size: the conlleval F1 on the whole file (batch 64) and the tagging speed in sentences/s at
batch 64 (the whole file) and at batch 1 (the first --batch1-sentences sentences), after a warm-up.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from seqlab.data.corpus import read_file
from seqlab.tagger import Tagger


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--beams", default="1,4,8")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch1-sentences", type=int, default=300)
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    tagger = Tagger.load(args.model)
    sentences = read_file(Path(args.data), tagger.config.data)
    rows = []
    for beam in (int(b) for b in args.beams.split(",")):
        tagger.set_beam(beam)
        tagger.predict_tags(sentences[:50], 64)  # warm-up
        start = time.perf_counter()
        scores = tagger.evaluate(sentences, 64).scores
        seconds = time.perf_counter() - start
        few = sentences[: args.batch1_sentences]
        start = time.perf_counter()
        tagger.predict_tags(few, 1)
        b1 = len(few) / (time.perf_counter() - start)
        rows.append(
            {
                "beam": beam,
                "f1": round(scores.f1, 2),
                "sentences": len(sentences),
                "batch64_sentences_per_s": round(len(sentences) / seconds, 1),
                "batch1_sentences_per_s": round(b1, 1),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"model": args.model, "data": args.data, "threads": args.threads, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
