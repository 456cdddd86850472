import sys, time, collections
from chunker import after_training, reset
tagger, corpus = after_training(1)
test = corpus.test
import numpy as np
from seqlab.features.chars import TokenMemo, CharFeatures
import seqlab.features.chars as ch
calls = []
of = TokenMemo.find
def rec(self, ids, hashes):
    calls.append((self, ids.copy(), hashes.copy())); return of(self, ids, hashes)
TokenMemo.find = rec
tagger.predict_tags(test, 64); calls.clear(); tagger.predict_tags(test, 64)
TokenMemo.find = of
print(len(calls), "calls; distinct per call", np.mean([len(c[1]) for c in calls]), "width", np.mean([c[1].shape[1] for c in calls]), "memo chars", calls[0][0].chars.shape)
acc = collections.Counter()
def find(self, ids, hashes):
    T = time.perf_counter
    t0 = T()
    at = np.minimum(np.searchsorted(self.hashes, hashes), len(self.hashes) - 1)
    t1 = T(); acc["searchsorted"] += t1 - t0
    rows = np.where(self.hashes[at] == hashes, self.rows[at], -1)
    hit = np.flatnonzero(rows >= 0)
    t2 = T(); acc["where"] += t2 - t1
    stored, width = rows[hit], ids.shape[1]
    if width <= self.chars.shape[1]:
        g = self.chars[stored, :width]
        t3 = T(); acc["gather"] += t3 - t2
        same = (g == ids[hit]).all(axis=1) & (self.lengths[stored] <= width)
        acc["compare"] += T() - t3
    rows[hit[~same]] = -1
    return rows
for _ in range(5):
    for m, ids, h in calls: find(m, ids, h)
t = time.perf_counter()
for _ in range(5):
    for m, ids, h in calls: of(m, ids, h)
print("find per pass", (time.perf_counter() - t) / 5 * 1e3, "ms")
print({k: round(v / 10 * 1e3, 2) for k, v in acc.items()})
t = time.perf_counter()
for _ in range(5):
    for m, ids, h in calls: ch.token_hashes(ids)
print("hash per pass", (time.perf_counter() - t) / 5 * 1e3, "ms")
