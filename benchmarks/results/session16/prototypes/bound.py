import time, torch, statistics
from seqlab.tagger import Tagger, _Row
from seqlab.data.batching import size_groups, collate
from seqlab.devices import run_concurrently
torch.set_num_threads(2)
tagger = Tagger.load("runs/speed/chunk-model/model")
from seqlab.data.corpus import load_corpus
test = load_corpus(tagger.config.data, "../shared/data").test
tagger.net.eval()
groups = size_groups([len(s.tokens) for s in test], 64, pad_overhead=tagger.pad_overhead)
pre = []
for g in groups:
    enc = tagger.encode([test[i] for i in g]); pre.append((g, collate(enc, list(range(len(enc))), tagger.featurizers)))
def net_only():
    rows = [_Row() for _ in test]
    def tag(item):
        g, batch = item
        tagger._tag_batch(batch, [rows[i] for i in g], 0, False, (), False)
    with torch.inference_mode():
        run_concurrently(tag, pre, tagger.device)
def full(): tagger.predict_tags(test, 64)
for f in (net_only, full): f(); f()
res = {"net_only": [], "full": []}
for rep in range(7):
    for name, f in (("net_only", net_only), ("full", full)):
        s = time.perf_counter(); f(); res[name].append(len(test) / (time.perf_counter() - s))
print({k: round(statistics.median(v)) for k, v in res.items()})
