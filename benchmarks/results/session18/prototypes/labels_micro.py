import sys, time
from chunker import after_training, reset
tagger, corpus = after_training(1)
test = corpus.test
rows = tagger._run(test, 64)
seqs = [r.tags for r in rows]
for _ in range(3):
    t = time.perf_counter(); out = [tagger.to_labels(s) for s in seqs]; print("to_labels", (time.perf_counter() - t) * 1e3, "ms")
conv = tagger.to_labels
print(conv.src, conv.dst, conv.table is not None, len(conv.itos))
import numpy as np
from seqlab.data.batching import size_groups
t = time.perf_counter()
groups = size_groups([len(s.tokens) for s in test], 64)
tot = 0
for g in groups:
    L = np.array([len(seqs[i]) for i in g]); T = L.max()
    arr = np.zeros((len(g), T), dtype=np.int64)
    for k, i in enumerate(g): arr[k, :L[k]] = seqs[i]
    t0 = time.perf_counter(); res = conv.rows(arr, L); tot += time.perf_counter() - t0
    for k, i in enumerate(g): assert res[k] == conv(seqs[i])
print("rows", tot * 1e3, "ms")
