"""One sentence at a time: encode + collate (the onnxruntime path before) against collate_sentences with and without
token types, us a sentence over the 2,012 test sentences (types and memos warm), best of 5."""
import time
from chunker import best_of, fresh_chunker
from seqlab.data.batching import collate, collate_sentences
tagger, corpus = fresh_chunker(2)
test, f = corpus.test, tagger.featurizers
tagger.predict_tags(test, 1)
tagger.encode(test)
def per_sentence(s):
    enc = tagger.encode([s]); return collate(enc, [0], f)
variants = {"encode + collate": per_sentence, "collate_sentences": lambda s: collate_sentences([s], f),
            "collate_sentences + types": lambda s: collate_sentences([s], f, tagger.token_types)}
for _ in range(2):
    for name, fn in variants.items():
        print(f"{name:28s} {best_of(fn, test) / len(test) * 1e6:6.1f} us")
import cProfile, pstats, sys
if len(sys.argv) > 1:
    pr = cProfile.Profile(); pr.enable()
    for s in test: collate_sentences([s], f, tagger.token_types)
    pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(18)
