import sys, time, statistics, os
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
tagger.net.eval()
test = corpus.test
for v in ("0", "1"):
    os.environ["LPT"] = v; tagger.predict_tags(test, 50); tagger.predict_tags(test, 64)
res = {v: ([], []) for v in ("0", "1")}
ref = tagger.predict_tags(test, 64)
for rep in range(int(sys.argv[1])):
    for v in res:
        os.environ["LPT"] = v
        bs = 63 - rep
        t = time.perf_counter(); out = tagger.predict_tags(test, bs); res[v][0].append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter(); out = tagger.predict_tags(test, 64); res[v][1].append((time.perf_counter() - t) * 1e3)
        assert out == ref
for v, (n, w) in res.items():
    print(f"LPT={v}: new shapes {statistics.median(n):.0f} {[round(x) for x in n]}; warm {statistics.median(w):.0f} {[round(x) for x in w]}")
