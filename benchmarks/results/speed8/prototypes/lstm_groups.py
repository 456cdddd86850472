"""Prototype: at inference, a padded batch through the fused bidirectional kernel, one call per length group."""
import time, statistics, torch
from seqlab.tagger import Tagger
from seqlab.data.readers import read_conll
from seqlab.lstm import BiLSTM
torch.set_num_threads(2)
tagger = Tagger.load("runs/speed/chunk-model/model")
test = read_conll("../shared/data/conll2000/test.txt", label_column=2)
orig = BiLSTM._fused
def grouped(self, x, lengths):
    if self.training or torch.is_grad_enabled():
        return None
    if not self.cross or self.packed_inference:
        return orig(self, x, lengths)
    n = x.shape[1]
    if int(lengths.min()) == n:
        return self._bidirectional_copy()(x)[0]
    bi = self._bidirectional_copy()
    out = x.new_zeros(x.shape[0], n, 2 * self.fwd[0].hidden_size)
    L = lengths.tolist()
    for length in sorted(set(L)):
        rows = torch.tensor([i for i, l in enumerate(L) if l == length])
        out[rows, :length] = bi(x[rows, :length])[0]
    return out
tagger.predict_tags(test[:300], 64)
res = {"A": [], "B": []}; tags = {}
for rep in range(5):
    for v in ("A", "B") if rep % 2 == 0 else ("B", "A"):
        BiLSTM._fused = grouped if v == "B" else orig
        t = time.perf_counter(); out = tagger.predict_tags(test, 64); res[v].append(round(len(test) / (time.perf_counter() - t), 1))
        tags[v] = out
BiLSTM._fused = orig
print(res, "B/A", round(statistics.median(res["B"]) / statistics.median(res["A"]), 3), "same tags", tags["A"] == tags["B"])
