import random, statistics, sys, time, torch
from concurrent.futures import ThreadPoolExecutor
torch.set_num_threads(2)
sys.path.insert(0, "/work/main")
from seqlab.config import load_config
from seqlab.data.batching import batch_groups, collate
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step, clip_and_step
sets = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"] if sys.argv[1] == "sgd" else []
config = load_config("/work/main/configs/chunking-bilstm-crf.yaml", sets)
seed_everything(1)
corpus = load_corpus(config.data, "/work/shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
net, cfg = tagger.net, config.train
params = [q for q in net.parameters() if q.requires_grad]
opt = make_optimizer(params, cfg)
enc = tagger.encode(corpus.train, with_tags=True)
groups = batch_groups(enc, cfg.batch_size, None, shuffle=True, rng=random.Random(1))[:400]
whole = [collate([enc[i] for i in g], g, tagger.featurizers) for g in groups]
halves = [(collate([enc[i] for i in g[: len(g) // 2]], g[: len(g) // 2], tagger.featurizers),
           collate([enc[i] for i in g[len(g) // 2:]], g[len(g) // 2:], tagger.featurizers)) for g in groups if len(g) > 1]
pool = ThreadPoolExecutor(1)
net.train()
def half(batch, scale):
    losses = net.loss(batch)
    return torch.autograd.grad(losses.sum() * scale, params, allow_unused=True)
def step_halves(a, b):
    n = len(a.index) + len(b.index)
    scale = 1.0 if cfg.loss_reduction == "sum" else 1.0 / n
    torch.set_num_threads(1)
    fut = pool.submit(half, a, scale)
    gb = half(b, scale)
    ga = fut.result()
    torch.set_num_threads(2)
    for p, x, y in zip(params, ga, gb):
        p.grad = None if x is None and y is None else (x if y is None else (y if x is None else x + y))
    clip_and_step(opt, params, cfg.clip)
for i in range(20):
    train_step(net, whole[i], opt, params, cfg); step_halves(*halves[i])
ra, rb = [], []
k = 20
for block in range(8):
    s = time.perf_counter()
    for i in range(k + block * 40, k + block * 40 + 40): train_step(net, whole[i % len(whole)], opt, params, cfg)
    ra.append(40 / (time.perf_counter() - s))
    s = time.perf_counter()
    for i in range(k + block * 40, k + block * 40 + 40): step_halves(*halves[i % len(halves)])
    rb.append(40 / (time.perf_counter() - s))
print(sys.argv[1], "whole steps/s", round(statistics.median(ra), 1), "halves", round(statistics.median(rb), 1), "ratio", round(statistics.median([b / a for a, b in zip(ra, rb)]), 3))
