"""The CoNLL-2000 chunker of configs/chunking-bilstm-crf.yaml, freshly built (the weights' values do not change the
speed), for this session's prototypes. Run them from the repository root with
PYTHONPATH=benchmarks/results/session18/prototypes."""

import time

import torch

from seqlab.config import load_config
from seqlab.data.corpus import load_corpus
from seqlab.features.chars import CharFeatures
from seqlab.tagger import Tagger
from seqlab.training import seed_everything


def fresh_chunker(threads: int):
    """(tagger, corpus): the shipped chunker config built on its corpus, eval mode, on ``threads`` threads."""
    torch.set_num_threads(threads)
    config = load_config("configs/chunking-bilstm-crf.yaml", [])
    seed_everything(1)
    corpus = load_corpus(config.data, "../shared/data")
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    tagger.net.eval()
    return tagger, corpus


def after_training(threads: int):
    """The chunker with its featurizers' memos holding the training and test tokens (as after speed.py's training
    and its batch-1 pass on onnxruntime) and the LSTM's shapes of a pass at batch 64 made."""
    tagger, corpus = fresh_chunker(threads)
    tagger.encode(corpus.train, with_tags=True)
    tagger.encode(corpus.test)
    tagger.predict_tags(corpus.test, 64)
    tagger.predict_tags(corpus.test, 64)
    return tagger, corpus


def reset(tagger, types: bool = True) -> None:
    """Inference memos emptied: the token types (None: the featurizers' own lookups), each featurizer's per-type
    values and the char memo."""
    from seqlab.data.token_types import TokenTypes
    tagger.token_types = TokenTypes(10**6) if types else None
    for f in tagger.featurizers.values():
        by_type = getattr(f, "_by_type", None)
        if by_type is not None:
            f._by_type = type(by_type)(by_type.compute)
    for m in tagger.net.modules():
        if isinstance(m, CharFeatures):
            m._memo = None


def best_of(fn, items, reps: int = 5) -> float:
    """Seconds of the fastest of ``reps`` runs of ``fn`` over every item."""
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for item in items:
            fn(item)
        best = min(best, time.perf_counter() - start)
    return best


def memos_after_training(tagger, corpus):
    """The featurizers' memos holding the training tokens alone (as after training), and a function setting them
    back to that and emptying the char memo (a first pass's state, the LSTM's shapes aside)."""
    for f in tagger.featurizers.values():
        if hasattr(f, "_cache"):
            f._cache = {}
    tagger.encode(corpus.train, with_tags=True)
    snap = {f.name: dict(f._cache) for f in tagger.featurizers.values() if hasattr(f, "_cache")}

    def back() -> None:
        for f in tagger.featurizers.values():
            if hasattr(f, "_cache"):
                f._cache = dict(snap[f.name])
        for m in tagger.net.modules():
            if isinstance(m, CharFeatures):
                m._memo = None
    return back
