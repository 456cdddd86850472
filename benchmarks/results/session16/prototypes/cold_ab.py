"""In-process A/B of a cold batch-64 pass: featurizer memos reset to 'after training + warm-up', char memo emptied."""
import os, sys, time, statistics, torch
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
from seqlab.features.chars import CharFeatures
from seqlab.features.chars import CharCNN
_fwd = CharCNN.forward
def patched(self, chars):
    if os.environ.get("VARIANT") == "A" and not torch.is_grad_enabled():
        return self._padded(chars)
    return _fwd(self, chars)
CharCNN.forward = patched
torch.set_num_threads(int(os.environ.get("THREADS", 2)))
tagger = Tagger.load("runs/speed/chunk-model/model")
corpus = load_corpus(tagger.config.data, "../shared/data")
test = corpus.test
tagger.encode(corpus.train)
tagger.predict_tags(test, 64); tagger.predict_tags(test, 64)  # shapes warm for both variants
def reset():
    for f in tagger.featurizers.values():
        if hasattr(f, "_cache"): f._cache = dict(snap[f.name])
    for m in tagger.net.modules():
        if isinstance(m, CharFeatures): m._memo = None
snap = {}
for f in tagger.featurizers.values():
    if hasattr(f, "_cache"):
        f._cache = {}
tagger.encode(corpus.train)
snap = {f.name: dict(f._cache) for f in tagger.featurizers.values() if hasattr(f, "_cache")}
variants = sys.argv[1:] or ["A", "B"]
res = {v: [] for v in variants}
cold_warm = {v: [] for v in variants}
for rep in range(int(os.environ.get("REPS", 7))):
    for v in variants:
        os.environ["VARIANT"] = v
        reset()
        tagger.predict_tags(test[:200], 64)
        t = time.perf_counter(); tagger.predict_tags(test, 64); res[v].append(len(test) / (time.perf_counter() - t))
        t = time.perf_counter(); tagger.predict_tags(test, 64); cold_warm[v].append(len(test) / (time.perf_counter() - t))
for v in variants:
    print(v, "cold median", round(statistics.median(res[v])), [round(x) for x in res[v]], "warm median", round(statistics.median(cold_warm[v])))
