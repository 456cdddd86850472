import os, sys, time, statistics, torch
from seqlab.features.chars import CharFeatures
from chunker import fresh_chunker, memos_after_training
tagger, corpus = fresh_chunker(int(sys.argv[1]))
reset = memos_after_training(tagger, corpus)
test = corpus.test
t = time.perf_counter(); tagger.predict_tags(test, 64); first = time.perf_counter() - t
cold, warm = [], []
for rep in range(7):
    reset()
    tagger.predict_tags(test[:200], 64)
    t = time.perf_counter(); tagger.predict_tags(test, 64); cold.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter(); tagger.predict_tags(test, 64); warm.append((time.perf_counter() - t) * 1e3)
print(f"threads {sys.argv[1]} first {first*1e3:.0f} ms; memo-cold median {statistics.median(cold):.0f} {[round(x) for x in cold]}; warm {statistics.median(warm):.0f} {[round(x) for x in warm]}")
