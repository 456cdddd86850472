import time, torch, statistics
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
from seqlab.data.batching import size_groups
tagger = Tagger.load("runs/speed/chunk-model/model")
test = load_corpus(tagger.config.data, "../shared/data").test
groups = size_groups([len(s.tokens) for s in test], 64, pad_overhead=tagger.pad_overhead)
gs = [[test[i] for i in g] for g in groups]
T = [max(len(s.tokens) for s in g) for g in gs]
for name, f in tagger.featurizers.items():
    f.collate_sentences(gs[0], T[0])
    v = []
    for rep in range(5):
        s = time.perf_counter()
        for g, t in zip(gs, T): f.collate_sentences(g, t)
        v.append((time.perf_counter() - s) * 1e3)
    print(name, round(min(v), 1), "ms")
import cProfile, pstats
f = tagger.featurizers["char"]
pr = cProfile.Profile(); pr.enable()
for g, t in zip(gs, T): f.collate_sentences(g, t)
pr.disable(); pstats.Stats(pr).sort_stats("tottime").print_stats(12)
