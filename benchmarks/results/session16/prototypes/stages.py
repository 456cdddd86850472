import time, torch, os
torch.set_num_threads(int(os.environ.get("THREADS", 1)))
import seqlab.tagger as TG
from stage_timer import acc, tagger, test, wrap
net = tagger.net
wrap(tagger, "encode", "encode")
wrap(TG, "collate", "collate"); wrap(TG, "collate_sentences", "collate_sentences")
wrap(net.embedder, "forward", "embedder")
for i, e in enumerate(net.encoders): wrap(e, "forward", f"encoder{i}")
wrap(net, "head", "head(proj+viterbi)")
wrap(net.decoder.crf, "best_paths", "viterbi")
for m in net.embedder._modules.values(): wrap(m, "forward", "feat:" + type(m).__name__)
tagger.predict_tags(test, 64); tagger.predict_tags(test, 64)
acc.clear()
s = time.perf_counter()
for _ in range(3): tagger.predict_tags(test, 64)
total = (time.perf_counter() - s) / 3
print("pass", round(total * 1e3, 1), "ms;", round(len(test) / total), "sent/s")
for k, v in acc.most_common(): print(f"  {k:22s} {v / 3 * 1e3:7.1f} ms")
from torch.profiler import profile
with profile() as prof:
    tagger.predict_tags(test, 64)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
