"""The loaded chunker, CoNLL-2000 test, and wall time summed per wrapped call (stages.py, memo_cost2.py)."""
import collections
import time

from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger

tagger = Tagger.load("runs/speed/chunk-model/model")
corpus = load_corpus(tagger.config.data, "../shared/data")
test = corpus.test
acc = collections.Counter()


def wrap(obj, name, label):
    """obj.name, adding its wall time under ``label`` in ``acc`` at each call."""
    f = getattr(obj, name)

    def g(*a, **k):
        s = time.perf_counter()
        r = f(*a, **k)
        acc[label] += time.perf_counter() - s
        return r
    setattr(obj, name, g)
