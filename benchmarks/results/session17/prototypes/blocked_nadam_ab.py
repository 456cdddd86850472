import random, sys, time, torch
sys.path.insert(0, "/tmp/proto")
from blocked_nadam import BlockedNAdam
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
opts = {"nadam": make_optimizer(params, cfg)}
for blk in [int(x) for x in sys.argv[1:]]:
    o = BlockedNAdam(params, lr=2e-3); o.block = blk; opts[f"blocked{blk}"] = o
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None, shuffle=True, rng=random.Random(1))
net.train()
res = {k: [] for k in opts}
for b in batches[:30]:
    for o in opts.values(): train_step(net, b, o, params, cfg)
i = 30
for rep in range(7):
    for name, o in opts.items():
        t = time.perf_counter()
        for b in batches[i:i+50]: train_step(net, b, o, params, cfg)
        res[name].append((time.perf_counter() - t) / 50 * 1e3)
    i += 50
for k, v in res.items(): print(k, [round(x, 2) for x in v], "median", round(sorted(v)[3], 3))
