import sys, time, resource
import torch
from chunker import fresh_chunker
tagger, corpus = fresh_chunker(2)
tagger.net.eval()
test = corpus.test
tagger.set_engine("auto"); tagger.predict_tags(test, 1)
tagger.predict_tags(test[:200], 64)
for i in range(3):
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()
    tagger.predict_tags(test, 64)
    dt = time.perf_counter() - t; r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"pass {i}: {dt*1e3:.0f} ms, minor faults {r1.ru_minflt - r0.ru_minflt}, user {r1.ru_utime-r0.ru_utime:.3f} sys {r1.ru_stime-r0.ru_stime:.3f}")
