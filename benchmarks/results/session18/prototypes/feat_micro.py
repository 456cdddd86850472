import time, torch, numpy as np
from seqlab.features.base import flat_tokens, memo_lookup, pad_flat
from seqlab.data.batching import size_groups
from chunker import best_of, fresh_chunker
tagger, corpus = fresh_chunker(1)
test = corpus.test
tagger.predict_tags(test, 64)
groups = size_groups([len(s.tokens) for s in test], 64)
batches = [[test[i] for i in g] for g in groups]
def t(name, fn):
    print(f"{name:30s} {best_of(fn, batches) * 1e3:7.2f} ms")
w = tagger.featurizers["word"]; c = tagger.featurizers["char"]; ca = tagger.featurizers["casing"]
t("flat_tokens", lambda b: flat_tokens(b))
toks = {id(b): flat_tokens(b) for b in batches}
t("memo_lookup word", lambda b: memo_lookup(w._cache, toks[id(b)][0], w._id))
t("pad_flat word", lambda b: pad_flat(memo_lookup(w._cache, toks[id(b)][0], w._id), toks[id(b)][1], int(toks[id(b)][1].max())))
t("collate word", lambda b: w.collate_sentences(b, max(len(s.tokens) for s in b)))
t("collate casing", lambda b: ca.collate_sentences(b, max(len(s.tokens) for s in b)))
t("collate char", lambda b: c.collate_sentences(b, max(len(s.tokens) for s in b)))
from seqlab.data.batching import collate_sentences
t("collate_sentences all", lambda b: collate_sentences(b, tagger.featurizers))
t("collate_sentences typed", lambda b: collate_sentences(b, tagger.featurizers, tagger.token_types))
# equality check
for b in batches:
    a = collate_sentences(b, tagger.featurizers); c = collate_sentences(b, tagger.featurizers, tagger.token_types)
    for n in a.features:
        for k in a.features[n]:
            assert torch.equal(a.features[n][k], c.features[n][k]), (n, k)
print("equal")
from seqlab.data.token_types import TypedTokens
t("TypedTokens.of", lambda b: TypedTokens.of(b, tagger.token_types))
typed = {id(b): TypedTokens.of(b, tagger.token_types) for b in batches}
T = lambda b: max(len(s.tokens) for s in b)
t("typed word", lambda b: w.collate_types(typed[id(b)], T(b)))
t("typed casing", lambda b: ca.collate_types(typed[id(b)], T(b)))
t("typed char", lambda b: tagger.featurizers["char"].collate_types(typed[id(b)], T(b)))
t("distinct", lambda b: typed[id(b)].distinct())
