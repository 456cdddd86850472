import random, sys, time, torch
torch.set_num_threads(2)
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step
config = load_config("configs/chunking-bilstm-crf.yaml", [])
seed_everything(1)
corpus = load_corpus(config.data, "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
net, cfg = tagger.net, config.train
params = [q for q in net.parameters() if q.requires_grad]
opts = {"nadam": make_optimizer(params, cfg), "fused_adam": torch.optim.Adam(params, lr=2e-3, fused=True),
        "foreach_adam": torch.optim.Adam(params, lr=2e-3, foreach=True)}
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None, shuffle=True, rng=random.Random(1))
net.train()
res = {k: [] for k in opts}
for b in batches[:30]:
    for o in opts.values(): train_step(net, b, o, params, cfg)
i = 30
for rep in range(5):
    for name, o in opts.items():
        t = time.perf_counter()
        for b in batches[i:i+60]: train_step(net, b, o, params, cfg)
        res[name].append((time.perf_counter() - t) / 60 * 1e3)
    i += 60
for k, v in res.items(): print(k, [round(x, 2) for x in v], "median", sorted(v)[2])
