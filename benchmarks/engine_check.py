"""Which shipped configs run on ``--engine onnxruntime``: each config's model is built (fitted on 300
training sentences, random weights: untrained nets give varied tags), tagged on 100 test sentences with
eager PyTorch and with onnxruntime (batch 64 and batch 1), and the tags and the largest confidence
difference are printed; a model the engine refuses prints the one-line reason.

    python benchmarks/engine_check.py configs/*.yaml configs/*/*.yaml --data-root ../shared/data
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("configs", nargs="+")
    parser.add_argument("--data-root", default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from seqlab.config import load_config
    from seqlab.data.corpus import load_corpus
    from seqlab.errors import SeqlabError
    from seqlab.tagger import Tagger

    for path in args.configs:
        torch.manual_seed(0)
        config = load_config(path, [])
        corpus = load_corpus(config.data, args.data_root)
        tagger = Tagger.build(config, corpus.train[:300], corpus.scheme, corpus.dev[:100])
        sentences = (corpus.test or corpus.dev)[:100]
        start = time.perf_counter()
        expected = tagger.predict(sentences, confidence=True)
        try:
            tagger.set_engine("onnxruntime")
        except SeqlabError as err:
            print(f"{path}: refused: {err}", flush=True)
            continue
        got = tagger.predict(sentences, confidence=True)
        same = [p.tags for p in got] == [p.tags for p in expected] == tagger.predict_tags(sentences, 1)
        diff = max(
            (
                abs(a - b)
                for p, q in zip(expected, got)
                for a, b in zip(p.token_confidence or [], q.token_confidence or [])
            ),
            default=0.0,
        )
        print(
            f"{path}: same tags {same}, largest token-confidence difference {diff:.1e} "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main()
