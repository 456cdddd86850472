"""Profile of training steps: python benchmarks/results/speed8/prototypes/prof_step.py CONFIG THREADS [KEY=VALUE ...]
(this session's profiles: configs/chunking-bilstm-crf.yaml 2 train.optimizer=sgd train.lr=0.015 train.clip=5.0;
configs/ner-resume-flat.yaml 1; configs/chunking-gcdt.yaml 2)."""
import random, sys, time, torch
from torch.profiler import profile, ProfilerActivity
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step
config_path, threads, overrides = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
torch.set_num_threads(threads)
config = load_config(config_path, overrides)
corpus = load_corpus(config.data, "../shared/data")
cfg = config.train
seed_everything(1)
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
params = [q for q in tagger.net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, cfg.batch_tokens,
                       shuffle=True, rng=random.Random(1), length=cfg.batch_length)[:60]
tagger.net.train()
for b in batches[:5]: train_step(tagger.net, b, opt, params, cfg)
t = time.perf_counter()
for b in batches[5:25]: train_step(tagger.net, b, opt, params, cfg)
print("ms/step", (time.perf_counter() - t) / 20 * 1000)
with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
    for b in batches[25:45]: train_step(tagger.net, b, opt, params, cfg)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=30, max_name_column_width=40))
