"""The char features' module alone, memo off and on, on one sentence and on one 64-sentence batch.

    python benchmarks/char_memo_micro.py MODEL DATA [--threads 1]

Collates the first 500 sentences of DATA one at a time and the first 64 as one batch, then times
``CharFeatures._memoised`` with the memo bypassed (the encoder on every distinct token) and with a warm memo,
twice each, alternating. Prints microseconds per call. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import time

import torch

from seqlab.features.chars import CharFeatures
from seqlab.tagger import Tagger


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from seqlab.data.readers import read_bmes, read_conll

    tagger = Tagger.load(args.model)
    data = tagger.config.data
    test = read_bmes(args.data) if data.format == "bmes" else read_conll(args.data, label_column=data.label_column)
    module = next(m for m in tagger.net.modules() if isinstance(m, CharFeatures))
    name = next(n for n, m in tagger.net.embedder.named_children() if m is module)
    featurizer = tagger.featurizers[name]
    ones = [featurizer.collate([featurizer.encode(s)], len(s))["chars"] for s in test[:500]]
    batch = featurizer.collate([featurizer.encode(s) for s in test[:64]], max(len(s) for s in test[:64]))["chars"]
    original = CharFeatures._memoised

    def off(self, chars):
        return self.encoder(chars)

    with torch.inference_mode():
        for label, fn in [("off", off), ("on", original), ("off", off), ("on", original)]:
            CharFeatures._memoised = fn
            for c in ones:  # warm-up (fills the memo)
                module._memoised(c)
            module._memoised(batch)
            start = time.perf_counter()
            for _ in range(3):
                for c in ones:
                    module._memoised(c)
            one = (time.perf_counter() - start) / (3 * len(ones)) * 1e6
            start = time.perf_counter()
            for _ in range(50):
                module._memoised(batch)
            many = (time.perf_counter() - start) / 50 * 1e6
            print(
                f"memo {label}: one sentence {one:.1f} us, one 64-sentence batch ({len(batch)} distinct tokens) "
                f"{many:.1f} us"
            )
    CharFeatures._memoised = original


if __name__ == "__main__":
    main()
