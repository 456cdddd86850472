"""Prototype: inference BiLSTM directions on two Python threads, intra-op 1 thread each."""
import time, statistics, torch
from concurrent.futures import ThreadPoolExecutor
from seqlab.tagger import Tagger
from seqlab.data.readers import read_conll
from seqlab.lstm import BiLSTM, reversal_index, gather_steps
torch.set_num_threads(2)
tagger = Tagger.load("runs/speed/chunk-model/model")
test = read_conll("../shared/data/conll2000/test.txt", label_column=2)
pool = ThreadPoolExecutor(1)
orig_fused, orig_per = BiLSTM._fused, BiLSTM._per_direction
def per_par(self, x, lengths):
    if torch.is_grad_enabled() or len(self.fwd) != 1 or x.shape[0] < 8:
        return orig_per(self, x, lengths)
    index = reversal_index(lengths, x.shape[1])
    xb = gather_steps(x, index)
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fut = pool.submit(lambda: self.bwd[0](xb)[0])
        out_f = self.fwd[0](x)[0]
        out_b = fut.result()
    finally:
        torch.set_num_threads(n)
    return out_f, gather_steps(out_b, index)
def fused_par(self, x, lengths):
    if self.training or torch.is_grad_enabled():
        return None
    if self.cross and len(self.fwd) == 1 and x.shape[0] >= 8:
        return torch.cat(per_par(self, x, lengths), dim=-1)
    return orig_fused(self, x, lengths)
tagger.predict_tags(test[:300], 64)
res = {"A": [], "B": []}; tags = {}
for rep in range(6):
    for v in ("A", "B") if rep % 2 == 0 else ("B", "A"):
        BiLSTM._fused = fused_par if v == "B" else orig_fused
        BiLSTM._per_direction = per_par if v == "B" else orig_per
        t = time.perf_counter(); out = tagger.predict_tags(test, 64); res[v].append(round(len(test) / (time.perf_counter() - t), 1))
        tags[v] = out
BiLSTM._fused, BiLSTM._per_direction = orig_fused, orig_per
print(res, "B/A", round(statistics.median(res["B"]) / statistics.median(res["A"]), 3), "same tags", tags["A"] == tags["B"])
