import random, time, torch
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step
torch.set_num_threads(2)
config = load_config("configs/chunking-gcdt.yaml", [])
corpus = load_corpus(config.data, "../shared/data")
cfg = config.train
seed_everything(1)
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
params = [q for q in tagger.net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, cfg.batch_tokens, shuffle=True, rng=random.Random(1), length=cfg.batch_length)[:30]
tagger.net.train()
for b in batches[:3]: train_step(tagger.net, b, opt, params, cfg)
t=time.perf_counter()
for b in batches[3:13]: train_step(tagger.net, b, opt, params, cfg)
el=time.perf_counter()-t
print("ms/step", el/10*1000, "sent/s", sum(len(b.index) for b in batches[3:13])/el, "sent/batch", len(batches[3].index))
from torch.profiler import profile, ProfilerActivity
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for b in batches[13:18]: train_step(tagger.net, b, opt, params, cfg)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=40))
