import time, torch, numpy as np, collections
import seqlab.features.chars as CH
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
torch.set_num_threads(1)
tagger = Tagger.load("runs/speed/chunk-model/model")
corpus = load_corpus(tagger.config.data, "../shared/data")
test = corpus.test
acc = collections.Counter()
def timed(obj, name, label):
    f = getattr(obj, name)
    def g(*a, **k):
        s = time.perf_counter(); r = f(*a, **k); acc[label] += time.perf_counter() - s; return r
    setattr(obj, name, g)
cf = next(m for m in tagger.net.modules() if isinstance(m, CH.CharFeatures))
timed(CH.CharFeatures, "_memoised", "memoised total")
timed(cf.encoder, "forward", "encoder")
timed(CH.TokenMemo, "find", "find")
timed(CH.TokenMemo, "add", "add")
timed(CH, "token_hashes", "hash")
tagger.encode(corpus.train)
tagger.predict_tags(test[:200], 64); acc.clear()
for label in ("cold", "warm"):
    tagger.predict_tags(test, 64)
    print(label, {k: round(v * 1e3, 1) for k, v in acc.items()}); acc.clear()
from torch.profiler import profile
for m in tagger.net.modules():
    if isinstance(m, CH.CharFeatures): m._memo = None
with profile() as prof:
    tagger.predict_tags(test, 64)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22))
