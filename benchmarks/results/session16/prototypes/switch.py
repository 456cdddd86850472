import time, torch, statistics, sys
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
torch.set_num_threads(2)
tagger = Tagger.load("runs/speed/chunk-model/model")
test = load_corpus(tagger.config.data, "../shared/data").test
tagger.predict_tags(test, 64); tagger.predict_tags(test, 64)
res = {}
for rep in range(7):
    for iv in (0.005, 0.001, 0.0002):
        sys.setswitchinterval(iv)
        s = time.perf_counter(); tagger.predict_tags(test, 64); res.setdefault(iv, []).append(len(test) / (time.perf_counter() - s))
print({k: round(statistics.median(v)) for k, v in res.items()})
