"""Where a batch-1 predict_tags call goes on --engine auto (onnxruntime), the chunker, 2 threads as speed.py sets."""
import cProfile, pstats, sys, time
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
test = corpus.test
tagger.set_engine("auto")
tagger.predict_tags(test, 1)
t = time.perf_counter(); tagger.predict_tags(test, 1); print("pass", round((time.perf_counter() - t) * 1e3), "ms")
pr = cProfile.Profile(); pr.enable()
tagger.predict_tags(test, 1)
pr.disable()
pstats.Stats(pr).sort_stats(sys.argv[1] if len(sys.argv) > 1 else "tottime").print_stats(35)
