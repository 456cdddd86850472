"""MiniLM's training pass in float32 against bfloat16 (``train_precision``), on one thread, alternating A and B:
the first 400 CoNLL-2003 training sentences with ``context: 128``, in batches of 10 as training makes them; the
medians of the per-batch times. Run from the repository root: ``python benchmarks/bf16_speed.py``."""

import statistics
import time

import torch

from seqlab.data.batching import Encoded, collate
from seqlab.data.readers import read_conll
from seqlab.data.sentence import link_neighbours
from seqlab.features import ContextualConfig
from seqlab.nn.context import Context

torch.set_num_threads(1)
sentences = read_conll("../shared/data/conll2003/train.txt")[:400]
link_neighbours(sentences, 32)
modules = {}
for precision in ("float32", "bfloat16"):
    featurizer = ContextualConfig(context=128, train_precision=precision, cache_mb=0).build("ctx")
    featurizer.fit([], [], 1)
    modules[precision] = (featurizer, featurizer.module().train())
times = {precision: [] for precision in modules}
for b in range(0, len(sentences), 10):
    group = sentences[b : b + 10]
    order = list(modules.items()) if b % 20 == 0 else list(reversed(modules.items()))
    for precision, (featurizer, module) in order:
        encoded = [Encoded(len(s), {"ctx": featurizer.encode(s)}) for s in group]
        batch = collate(encoded, list(range(len(group))), {"ctx": featurizer})  # as training batches them
        start = time.perf_counter()
        module(batch.features["ctx"], Context.of(batch.mask))
        times[precision].append(time.perf_counter() - start)
for precision, ts in times.items():
    print(precision, "median s/batch", round(statistics.median(ts), 4), "total", round(sum(ts), 1), "batches", len(ts))
print("speed-up", round(statistics.median(times["float32"]) / statistics.median(times["bfloat16"]), 2))
