import time, numpy as np, itertools
from seqlab.data.corpus import load_corpus
from seqlab.config import load_config
config = load_config("configs/chunking-bilstm-crf.yaml", [])
corpus = load_corpus(config.data, "../shared/data")
sents = corpus.test
batches = [sents[i:i+64] for i in range(0, len(sents), 64)]
known = {}
for s in corpus.train + sents:
    for t in s.tokens: known.setdefault(t, len(known))
from chunker import best_of
def t(name, fn):
    print(f"{name:30s} {best_of(fn, batches, 7) * 1e3:7.2f} ms")
t("flat listcomp", lambda b: [x for s in b for x in s.tokens])
t("flat chain", lambda b: list(itertools.chain.from_iterable(s.tokens for s in b)))
flat = {id(b): [x for s in b for x in s.tokens] for b in batches}
t("np.array(listcomp)", lambda b: np.array([known[x] for x in flat[id(b)]], dtype=np.int64))
t("fromiter(map getitem)", lambda b: np.fromiter(map(known.__getitem__, flat[id(b)]), dtype=np.int64, count=len(flat[id(b)])))
t("list(map getitem)", lambda b: list(map(known.__getitem__, flat[id(b)])))
t("fromiter chain", lambda b: np.fromiter(map(known.__getitem__, itertools.chain.from_iterable(s.tokens for s in b)), dtype=np.int64))
import array
lists = {id(b): list(map(known.__getitem__, flat[id(b)])) for b in batches}
t("np.array(list)", lambda b: np.array(lists[id(b)], dtype=np.int64))
t("array.array q", lambda b: np.frombuffer(array.array('q', lists[id(b)]), dtype=np.int64))
t("array.array q from map", lambda b: np.frombuffer(array.array('q', map(known.__getitem__, flat[id(b)])), dtype=np.int64))
import operator
t("itemgetter", lambda b: operator.itemgetter(*flat[id(b)])(known))
