import time, torch
torch.set_num_threads(1)
import seqlab.features.chars as CH
from stage_timer import acc, corpus, tagger, test, wrap as timed
cf = next(m for m in tagger.net.modules() if isinstance(m, CH.CharFeatures))
timed(CH.CharFeatures, "_memoised", "memoised total")
timed(cf.encoder, "forward", "encoder")
timed(CH.TokenMemo, "find", "find")
timed(CH.TokenMemo, "add", "add")
timed(CH, "token_hashes", "hash")
tagger.encode(corpus.train)
tagger.predict_tags(test[:200], 64); acc.clear()
for label in ("cold", "warm"):
    tagger.predict_tags(test, 64)
    print(label, {k: round(v * 1e3, 1) for k, v in acc.items()}); acc.clear()
from torch.profiler import profile
for m in tagger.net.modules():
    if isinstance(m, CH.CharFeatures): m._memo = None
with profile() as prof:
    tagger.predict_tags(test, 64)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=22))
