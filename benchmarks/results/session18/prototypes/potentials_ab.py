"""The CRF decoder at batch 1 (projection, potentials, NumPy Viterbi) with the potentials kept as NumPy arrays
between calls against made each call, alternated blocks over the 2,012 test sentences' encoder outputs (1 thread)."""
import statistics, time
import torch
from chunker import fresh_chunker
from seqlab.crf import CRF
tagger, corpus = fresh_chunker(1)
dec = tagger.net.decoder
kept = CRF._numpy_potentials
def made(self):
    return tuple(p.detach().numpy() for p in self._potentials())
feats = []
with torch.inference_mode():
    for s in corpus.test:
        b = tagger.encode([s])
        from seqlab.data.batching import collate
        batch = collate(b, [0], tagger.featurizers)
        x, ctx = tagger.net._encode(batch, ())
        feats.append((x, batch.mask, ctx))
res = {"kept": [], "made": []}
with torch.inference_mode():
    for rep in range(7):
        for name, fn in (("kept", kept), ("made", made)):
            CRF._numpy_potentials = fn
            t = time.perf_counter()
            for x, m, ctx in feats: dec.decode(x, m, ctx)
            res[name].append((time.perf_counter() - t) / len(feats) * 1e6)
for k, v in res.items(): print(k, round(statistics.median(v), 1), "us a sentence", [round(x, 1) for x in v])
