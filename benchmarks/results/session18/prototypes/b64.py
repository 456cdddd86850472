import sys, time, os, json
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
if os.environ.get("TYPES") == "0":
    tagger.token_types = None
tagger.encode(corpus.train, with_tags=True)
tagger.net.eval()
test = corpus.test
tagger.set_engine("auto")
tagger.predict_tags(test, 1)
tagger.predict_tags(test[:200], 64)
out = []
for i in range(3):
    t = time.perf_counter(); tagger.predict_tags(test, 64); out.append(len(test) / (time.perf_counter() - t))
print(json.dumps(out))
