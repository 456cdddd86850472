import time, torch
from seqlab.tagger import Tagger
from seqlab.data.corpus import load_corpus
from seqlab.features.chars import CharCNN
torch.set_num_threads(1)
tagger = Tagger.load("runs/speed/chunk-model/model")
corpus = load_corpus(tagger.config.data, "../shared/data")
test = corpus.test
inputs = []
orig = CharCNN.forward
def f(self, chars):
    inputs.append(chars); return orig(self, chars)
CharCNN.forward = f
tagger.predict_tags(test[:200], 64)
inputs.clear()
tagger.predict_tags(test, 64)
CharCNN.forward = orig
cnn = next(m for m in tagger.net.modules() if isinstance(m, CharCNN))
print(len(inputs), "calls", sum(len(c) for c in inputs), "new tokens", "chars", sum(int(c.ne(0).sum()) for c in inputs), "padded", sum(c.numel() for c in inputs))
with torch.inference_mode():
    for name, fn in [("padded", cnn.forward), ("packed", cnn._packed)] * 3:
        t = time.perf_counter()
        outs = [fn(c) for c in inputs]
        print(name, round((time.perf_counter() - t) * 1e3, 1), "ms")
    a = [cnn.forward(c) for c in inputs]; b = [cnn._packed(c) for c in inputs]
    print("max diff", max(float((x - y).abs().max()) for x, y in zip(a, b)), "equal", all(torch.equal(x, y) for x, y in zip(a, b)))
from torch.profiler import profile
with torch.inference_mode(), profile() as prof:
    for c in inputs: cnn._packed(c)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
