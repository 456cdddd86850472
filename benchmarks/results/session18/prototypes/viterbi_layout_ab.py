"""The large-batch Viterbi with its sums laid out (from, batch, to) and the maximum over the outer axis, against
(batch, to, from) and over the last (seqlab/viterbi.py at 31e1080, loaded from /tmp/head): the emissions of a batch-64
pass, one thread, blocks alternated; the same tags and scores."""
import importlib.util, statistics, time
import numpy as np, torch
from chunker import fresh_chunker
import seqlab.viterbi as new
spec = importlib.util.spec_from_file_location("old_viterbi", "/tmp/head/seqlab/viterbi.py")
old = importlib.util.module_from_spec(spec); spec.loader.exec_module(old)
tagger, corpus = fresh_chunker(1)
crf = tagger.net.decoder.crf
captured = []
orig = new.viterbi
def grab(em, lengths, trans, start, end):
    captured.append((em.copy(), lengths.copy())); return orig(em, lengths, trans, start, end)
import seqlab.crf as crf_module
crf_module.viterbi = grab
tagger.predict_tags(corpus.test, 64)
crf_module.viterbi = orig
trans, start, end = crf._numpy_potentials()
print(len(captured), "batches")
for em, ln in captured:
    a, b = old.viterbi(em, ln, trans, start, end), new.viterbi(em, ln, trans, start, end)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
res = {"old": [], "new": []}
for rep in range(7):
    for name, mod in (("old", old), ("new", new)):
        t = time.perf_counter()
        for em, ln in captured: mod.viterbi(em, ln, trans, start, end)
        res[name].append((time.perf_counter() - t) * 1e3)
for k, v in res.items(): print(k, round(statistics.median(v), 1), "ms a pass", [round(x, 1) for x in v])
