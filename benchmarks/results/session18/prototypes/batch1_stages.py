"""A batch-1 pass on --engine auto, stage by stage (wall time summed over the 2,012 test sentences, ms)."""
import collections, time
from chunker import fresh_chunker
import seqlab.tagger as tg, seqlab.engine as eng, seqlab.viterbi as vit, seqlab.data.schemes as sch, seqlab.model as mdl
tagger, corpus = fresh_chunker(2)
test = corpus.test
tagger.set_engine("auto")
acc = collections.Counter()
def wrap(owner, name, label):
    f = getattr(owner, name)
    def w(*a, **k):
        t = time.perf_counter(); r = f(*a, **k); acc[label] += time.perf_counter() - t; return r
    setattr(owner, name, w)
wrap(tg.Tagger, "encode", "encode")
wrap(tg, "collate", "collate")
wrap(type(tagger.engine), "run", "onnxruntime run")
wrap(mdl.TaggerNet, "head", "head (projection + Viterbi)")
wrap(tg, "viterbi", "viterbi") if hasattr(tg, "viterbi") else None
import seqlab.crf as crf
wrap(crf, "viterbi", "numpy viterbi") if hasattr(crf, "viterbi") else None
wrap(sch.IndexConverter, "rows", "labels")
wrap(tg.Tagger, "_tag_batch", "_tag_batch")
tagger.predict_tags(test, 1)
for _ in range(3):
    acc.clear(); t = time.perf_counter(); tagger.predict_tags(test, 1); acc["total"] = time.perf_counter() - t
    print({k: round(v * 1e3, 1) for k, v in acc.items()})
