import random, sys, time, torch
torch.set_num_threads(2)
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step, clip_and_step
sets = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"] if sys.argv[1] == "sgd" else []
config = load_config("configs/chunking-bilstm-crf.yaml", sets)
seed_everything(1)
corpus = load_corpus(config.data, "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
net, cfg = tagger.net, config.train
params = [q for q in net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None, shuffle=True, rng=random.Random(1))
net.train()
def step(batch, fb_threads, opt_threads):
    torch.set_num_threads(fb_threads)
    losses = net.loss(batch)
    loss = losses.sum() if cfg.loss_reduction == "sum" else losses.mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.set_num_threads(opt_threads)
    clip_and_step(opt, params, cfg.clip)
variants = {"2/2": (2, 2), "1/2": (1, 2), "1/1": (1, 1)}
res = {k: [] for k in variants}
i = 0
for b in batches[:20]: step(b, 2, 2)
for rep in range(12):
    for k, (a, o) in variants.items():
        t = time.perf_counter()
        for b in batches[20 + i: 40 + i]: step(b, a, o)
        res[k].append((time.perf_counter() - t) / 20 * 1e3)
        i = (i + 20) % 800
for k, v in res.items(): print(sys.argv[1], k, "median", round(sorted(v)[6], 2), [round(x, 1) for x in v])
