import time, torch, numpy as np, statistics
import seqlab.viterbi as V
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
torch.set_num_threads(1)
tagger = Tagger.load("runs/speed/chunk-model/model")
corpus = load_corpus(tagger.config.data, "../shared/data")
crf = tagger.net.decoder.crf
allowed = crf.transition_penalty.eq(0).numpy()
print(V.MoveBlocks.of(allowed.tobytes(), allowed.shape[0]).order)
# capture emissions of batch-64 pass
caps = []
orig = V.viterbi
def cap(em, lengths, *a):
    caps.append((em.copy(), lengths.copy())); return orig(em, lengths, *a)
import seqlab.crf as C
C.viterbi = cap
tagger.predict_tags(corpus.test, 64)
C.viterbi = orig
trans, start, end = (p.detach().numpy() for p in crf._potentials())
same = all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for (em, l) in caps
           for a, b in [(V.viterbi(em, l, trans, start, end), V.viterbi(em, l, trans, start, end, allowed))])
print("batches", len(caps), "same", same)
res = {"dense": [], "blocks": []}
for rep in range(5):
    for name, al in (("dense", None), ("blocks", allowed)):
        s = time.perf_counter()
        for em, l in caps: V.viterbi(em, l, trans, start, end, al)
        res[name].append((time.perf_counter() - s) * 1e3)
print({k: round(statistics.median(v), 1) for k, v in res.items()}, "ms per pass")
