import os, sys, time, statistics, torch, collections
from seqlab.features.chars import CharFeatures, TokenMemo, CharCNN
import seqlab.features.base as fb
from chunker import fresh_chunker, memos_after_training
tagger, corpus = fresh_chunker(1)
reset = memos_after_training(tagger, corpus)
test = corpus.test
acc = collections.Counter()
def timed(name, fn):
    def w(*a, **k):
        t = time.perf_counter(); r = fn(*a, **k); acc[name] += time.perf_counter() - t; return r
    return w
for f in tagger.featurizers.values():
    f.collate_sentences = timed("collate " + f.name, f.collate_sentences)
CharFeatures._memoised = timed("char memoised", CharFeatures._memoised)
TokenMemo.add = timed("memo add", TokenMemo.add)
TokenMemo.find = timed("memo find", TokenMemo.find)
CharCNN.forward = timed("charcnn", CharCNN.forward)
tagger.predict_tags(test, 64)
res = collections.defaultdict(list)
for rep in range(5):
    reset()
    tagger.predict_tags(test[:200], 64)
    for kind in ("cold", "warm"):
        acc.clear()
        t = time.perf_counter(); tagger.predict_tags(test, 64); acc["total"] = time.perf_counter() - t
        for k, v in acc.items(): res[(kind, k)].append(v * 1e3)
for k in sorted(res): print(k, round(statistics.median(res[k]), 1))
