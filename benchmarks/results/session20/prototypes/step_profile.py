"""torch.profiler over 200 training steps of the chunker (sgd: lr 0.015, clip 5; or nadam), 2 threads: op table.
python benchmarks/results/session20/prototypes/step_profile.py sgd|nadam"""
import random, sys, time, torch
from torch.profiler import profile, ProfilerActivity
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step

opt_name = sys.argv[1] if len(sys.argv) > 1 else "sgd"
torch.set_num_threads(2)
over = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"] if opt_name == "sgd" else []
config = load_config("configs/chunking-bilstm-crf.yaml", over)
corpus = load_corpus(config.data, "../shared/data")
cfg = config.train
seed_everything(1)
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
params = [q for q in tagger.net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size,
                       cfg.batch_tokens, shuffle=True, rng=random.Random(1), length=cfg.batch_length)[:250]
tagger.net.train()
for b in batches[:50]:
    train_step(tagger.net, b, opt, params, cfg)
t = time.perf_counter()
for b in batches[50:]:
    train_step(tagger.net, b, opt, params, cfg)
print("ms per step, unprofiled:", round((time.perf_counter() - t) / 200 * 1000, 2))
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for b in batches[50:]:
        train_step(tagger.net, b, opt, params, cfg)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=45))
