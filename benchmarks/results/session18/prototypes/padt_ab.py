import sys, time, statistics, os
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
tagger.net.eval()
test = corpus.test
ms = sys.argv[1].split(",")
for m in ms:
    os.environ["PADT"] = m; tagger.predict_tags(test, 50); tagger.predict_tags(test, 50)
res = {m: ([], []) for m in ms}
ref = None
for rep in range(int(sys.argv[2])):
    for m in ms:
        os.environ["PADT"] = m
        bs = 64 - rep
        t = time.perf_counter(); out = tagger.predict_tags(test, bs); res[m][0].append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter(); tagger.predict_tags(test, 50); res[m][1].append((time.perf_counter() - t) * 1e3)
        ref = ref or out
        assert out == ref
for m, (n, w) in res.items():
    print(f"pad to multiple of {m}: new shapes {statistics.median(n):.0f} {[round(x) for x in n]}; warm {statistics.median(w):.0f} {[round(x) for x in w]}")
