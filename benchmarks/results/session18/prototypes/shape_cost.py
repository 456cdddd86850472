import sys, time, statistics
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(int(sys.argv[1]))
tagger.net.eval()
test = corpus.test
tagger.predict_tags(test, 50); tagger.predict_tags(test, 50)
new, warm = [], []
for rep in range(int(sys.argv[2])):
    bs = 64 - rep
    t = time.perf_counter(); tagger.predict_tags(test, bs); new.append((time.perf_counter() - t) * 1e3)
    t = time.perf_counter(); tagger.predict_tags(test, 50); warm.append((time.perf_counter() - t) * 1e3)
print(f"threads {sys.argv[1]}: new shapes {statistics.median(new):.0f} {[round(x) for x in new]}; warm shapes {statistics.median(warm):.0f} {[round(x) for x in warm]}")
