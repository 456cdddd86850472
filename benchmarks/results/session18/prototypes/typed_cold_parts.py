import sys, time, collections
from chunker import after_training, reset
tagger, corpus = after_training(1)
test = corpus.test
from seqlab.data import token_types as tt
from seqlab.data.batching import size_groups, collate_sentences
acc = collections.Counter()
def wrap(cls, name, label):
    f = getattr(cls, name)
    def w(self, *a, **k):
        t = time.perf_counter(); r = f(self, *a, **k); acc[label] += time.perf_counter() - t; return r
    setattr(cls, name, w)
wrap(tt.TokenTypes, "ids", "ids")
wrap(tt.TypeValues, "_append", "append values")
wrap(tt.TypeArrays, "_append", "append arrays")
wrap(tt.TypeArrays, "padded", "padded")
wrap(tt.TypedTokens, "distinct", "distinct")
groups = size_groups([len(s.tokens) for s in test], 64)
batches = [[test[i] for i in g] for g in groups]
for rep in range(3):
    for kind in ("cold", "warm"):
        if kind == "cold": reset(tagger, True)
        acc.clear()
        t = time.perf_counter()
        for b in batches: collate_sentences(b, tagger.featurizers, tagger.token_types)
        acc["total"] = time.perf_counter() - t
        print(kind, {k: round(v * 1e3, 1) for k, v in acc.items()})
