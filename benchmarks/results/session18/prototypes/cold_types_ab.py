"""In-process A/B of typed collation (token types) against the featurizers' own lookups: a cold pass (inference memos
emptied, LSTM shapes made) and the warm pass after it, alternated. Usage: cold_types_ab.py THREADS REPS"""
import sys, time, os, statistics
import torch
from chunker import after_training, reset as reset_memos
tagger, corpus = after_training(int(sys.argv[1]))
test = corpus.test
def reset(types):
    reset_memos(tagger, types)
res = {v: ([], []) for v in ("types", "none")}
for rep in range(int(sys.argv[2])):
    for v in res:
        reset(v == "types")
        tagger.predict_tags(test[:200], 64)
        t = time.perf_counter(); tagger.predict_tags(test, 64); res[v][0].append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter(); tagger.predict_tags(test, 64); res[v][1].append((time.perf_counter() - t) * 1e3)
for v, (c, w) in (res.items() if int(sys.argv[2]) else []):
    print(f"threads {sys.argv[1]} {v}: cold {statistics.median(c):.1f} ms {[round(x) for x in c]} warm {statistics.median(w):.1f} {[round(x) for x in w]}")
