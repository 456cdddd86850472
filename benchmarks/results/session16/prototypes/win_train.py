import random, time, statistics, torch
from torch import nn
from seqlab.config import load_config
from seqlab.data.corpus import load_corpus
from seqlab.data.batching import make_batches
from seqlab.tagger import Tagger
from seqlab.features.chars import CharCNN
torch.set_num_threads(2)
config = load_config("configs/chunking-bilstm-crf.yaml", [])
corpus = load_corpus(config.data, "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
enc = tagger.encode(corpus.train[:3000], with_tags=True)
batches = make_batches(enc, tagger.featurizers, 10, None, shuffle=True, rng=random.Random(1))[:150]
cnn = next(m for m in tagger.net.modules() if isinstance(m, CharCNN)).train()
new = CharCNN._packed
def old(self, chars):
    words, width = chars.shape
    real = chars.ne(0); lengths = real.sum(1)
    gap = max(max(k // 2, k - 1 - k // 2) for k in self.kernels); spans = lengths + gap
    starts = torch.cumsum(spans, 0) - spans + gap; total = int(spans.sum()) + gap
    where = (starts[:, None] + torch.arange(width))[real]
    flat = chars.new_zeros(total); flat[where] = chars[real]
    x = self.chars(flat); out = []
    for k, window in zip(self.kernels, self.windows):
        left = k // 2
        padded = nn.functional.pad(x, (0, 0, left, k - 1 - left))
        steps = torch.stack([padded[i: i + total] for i in range(k)], dim=-1)
        h = window(steps.flatten(1)).index_select(0, where)
        out.append(torch.segment_reduce(h, "max", lengths=lengths))
    return out[0] if len(out) == 1 else torch.cat(out, dim=-1)
chars = [b.features["char"]["chars"] for b in batches]
a = old(cnn, chars[0]); b = new(cnn, chars[0]); print("equal", torch.equal(a, b))
ga = torch.autograd.grad(a.sum() * 1.0, list(cnn.parameters())); gb = torch.autograd.grad(b.sum(), list(cnn.parameters()))
print("grads equal", all(torch.equal(x, y) for x, y in zip(ga, gb)))
res = {"stack": [], "slices": []}
for rep in range(7):
    for name, fn in (("stack", old), ("slices", new)):
        s = time.perf_counter()
        for c in chars:
            out = fn(cnn, c); out.sum().backward()
        res[name].append((time.perf_counter() - s) / len(chars) * 1e6)
for k, v in res.items(): print(k, round(statistics.median(v)), "us per batch fwd+bwd")
