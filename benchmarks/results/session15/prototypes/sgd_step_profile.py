import random, sys, torch
torch.set_num_threads(2)
from torch.profiler import profile
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step
config = load_config("configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"])
seed_everything(1)
corpus = load_corpus(config.data, "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
net, cfg = tagger.net, config.train
params = [q for q in net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None, shuffle=True, rng=random.Random(1))[:300]
net.train()
for b in batches[:50]: train_step(net, b, opt, params, cfg)
with profile() as p:
    for b in batches[50:250]: train_step(net, b, opt, params, cfg)
print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=28))
