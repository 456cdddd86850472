import sys, time, collections
from chunker import after_training, reset
tagger, corpus = after_training(1)
test = corpus.test
import seqlab.features.chars as ch
from torch.profiler import profile, ProfilerActivity
captured = []
oe = ch.CharCNN.forward
def enc(self, x):
    captured.append(x.clone()); return oe(self, x)
ch.CharCNN.forward = enc
reset(tagger, True); tagger.predict_tags(test[:200], 64); tagger.predict_tags(test, 64)
ch.CharCNN.forward = oe
cnn = [m for m in tagger.net.modules() if isinstance(m, ch.CharCNN)][0]
print(len(captured), sum(len(c) for c in captured), "tokens", sum(int(c.ne(0).sum()) for c in captured), "chars")
with torch.inference_mode():
    for _ in range(2):
        t = time.perf_counter()
        for c in captured: cnn(c)
        print("cnn total", (time.perf_counter() - t) * 1e3)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for c in captured: cnn(c)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
