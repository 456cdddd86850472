import os, sys, time, statistics, torch
from seqlab.features.chars import CharFeatures
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(int(sys.argv[1]))
for f in tagger.featurizers.values():
    if hasattr(f, "_cache"): f._cache = {}
tagger.encode(corpus.train, with_tags=True)
snap = {f.name: dict(f._cache) for f in tagger.featurizers.values() if hasattr(f, "_cache")}
tagger.net.eval()
test = corpus.test
t = time.perf_counter(); tagger.predict_tags(test, 64); first = time.perf_counter() - t
def reset():
    for f in tagger.featurizers.values():
        if hasattr(f, "_cache"): f._cache = dict(snap[f.name])
    for m in tagger.net.modules():
        if isinstance(m, CharFeatures): m._memo = None
cold, warm = [], []
for rep in range(7):
    reset()
    tagger.predict_tags(test[:200], 64)
    t = time.perf_counter(); tagger.predict_tags(test, 64); cold.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter(); tagger.predict_tags(test, 64); warm.append((time.perf_counter() - t) * 1e3)
print(f"threads {sys.argv[1]} first {first*1e3:.0f} ms; memo-cold median {statistics.median(cold):.0f} {[round(x) for x in cold]}; warm {statistics.median(warm):.0f} {[round(x) for x in warm]}")
