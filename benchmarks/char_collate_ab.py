"""The char featurizer's two ways of collating a batch, timed on real sentences: token by token (A) against
whole-array operations (B, from ``seqlab.features.chars.COLLATE_VECTOR_FROM`` tokens on), after checking on 300
random batches that both give the same tensors.

    python benchmarks/char_collate_ab.py runs/speed/chunk-model/model ../shared/data/conll2000/test.txt \
        [--batch-sizes 1,10,64] [--reps 3]

Prints microseconds per batch of the first sentences of the file; run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import random
import time
from pathlib import Path

import torch

import seqlab.features.chars as chars_module
from seqlab.data.corpus import read_file
from seqlab.features.chars import CharsFeaturizer
from seqlab.tagger import Tagger


def collate(featurizer: CharsFeaturizer, items, seq_len: int, vector: bool) -> dict:
    chars_module.COLLATE_VECTOR_FROM = 1 if vector else 10**9
    return featurizer.collate(items, seq_len)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--batch-sizes", default="1,10,64")
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args()
    tagger = Tagger.load(args.model)
    featurizer = next(f for f in tagger.featurizers.values() if isinstance(f, CharsFeaturizer))
    encoded = [featurizer.encode(s) for s in read_file(Path(args.data), tagger.config.data)]
    rng = random.Random(0)
    for _ in range(300):
        size = rng.choice([1, 2, 5, 10, 64, 200])
        start = rng.randrange(len(encoded) - size)
        items = encoded[start : start + size]
        seq_len = max(map(len, items)) + rng.choice([0, 3])
        a, b = (collate(featurizer, items, seq_len, vector) for vector in (False, True))
        assert all(torch.equal(a[k], b[k]) for k in ("chars", "rows"))
    print("the same tensors on 300 random batches")
    for size in (int(x) for x in args.batch_sizes.split(",")):
        items = encoded[:size]
        seq_len = max(map(len, items))
        times: dict[str, list[float]] = {"A": [], "B": []}
        for _ in range(args.reps):
            for name, vector in (("A", False), ("B", True)):
                begin = time.perf_counter()
                for _ in range(500):
                    collate(featurizer, items, seq_len, vector)
                times[name].append(round((time.perf_counter() - begin) / 500 * 1e6, 1))
        print(f"batch {size}: us per batch, A (token by token) {times['A']}, B (whole arrays) {times['B']}")


if __name__ == "__main__":
    main()
