# First draft of the sgd-rows lever (BENCHMARKS.md, twelfth session): python benchmarks/results/speed12/prototypes/sgd_rows_first_draft.py
"""Prototype: SGD step with the word embedding's gradient row-sparse (dense momentum buffer) vs dense."""
import math, random, statistics, time, torch
from torch import nn
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step
torch.set_num_threads(2)
config = load_config("configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"])
cfg = config.train
corpus = load_corpus(config.data, "../shared/data")

@torch.no_grad()
def _update(dense, sparse, coalesced, bufs, lr, mu, c):
    db = [bufs[id(p)] for p in dense]
    torch._foreach_mul_(db, mu); torch._foreach_add_(db, [p.grad for p in dense], alpha=c)
    torch._foreach_add_(dense, db, alpha=-lr)
    for p, g in zip(sparse, coalesced):
        b = bufs[id(p)]; b.mul_(mu); b.index_add_(0, g._indices()[0], g._values(), alpha=c)
        p.add_(b, alpha=-lr)

def sparse_step(net, batch, params, lr, mu, clip, bufs):
    losses = net.loss(batch)
    loss = losses.mean()
    for p in params: p.grad = None
    loss.backward()
    dense = [p for p in params if not p.grad.is_sparse]
    sparse = [p for p in params if p.grad.is_sparse]
    sq = torch._foreach_norm([p.grad for p in dense])
    total = torch.stack(sq).pow(2).sum()
    coalesced = []
    for p in sparse:
        g = p.grad.coalesce(); coalesced.append(g); total = total + g._values().pow(2).sum()
    coef = clip / (total.sqrt() + 1e-6)
    c = min(float(coef), 1.0)
    _update(dense, sparse, coalesced, bufs, lr, mu, c)
    return losses.detach()

models = {}
for v in ("A", "B"):
    seed_everything(1)
    t = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    params = [q for q in t.net.parameters() if q.requires_grad]
    if v == "B":
        for m in t.net.modules():
            if isinstance(m, nn.Embedding) and m.num_embeddings > 1000: m.sparse = True
        bufs = {id(p): torch.zeros_like(p) for p in params}
        models[v] = (t.net, params, bufs)
    else:
        models[v] = (t.net, params, make_optimizer(params, cfg))
    t.net.train()
batches = make_batches(t.encode(corpus.train, with_tags=True), t.featurizers, 10, None, shuffle=True, rng=random.Random(1))
def run(v, bs):
    net, params, x = models[v]
    for b in bs:
        if v == "A": train_step(net, b, x, params, cfg)
        else: sparse_step(net, b, params, cfg.lr, cfg.momentum, cfg.clip, x)
for v in "AB": run(v, batches[:20])
times = {"A": [], "B": []}
for rep in range(7):
    sec = {"A": 0.0, "B": 0.0}
    for k, lo in enumerate(range(20, 170, 10)):
        for v in ("A", "B") if k % 2 == 0 else ("B", "A"):
            s = time.perf_counter(); run(v, batches[lo:lo + 10]); sec[v] += time.perf_counter() - s
    for v in sec: times[v].append(round(sec[v] / 150 * 1000, 2))
print(times, statistics.median(times["A"]) / statistics.median(times["B"]))
print("weight diff", max((p - q).abs().max().item() for p, q in zip(models["A"][1], models["B"][1])))
# lockstep check without dropout
config2 = load_config("configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0", "model.embedder.dropout=0", "model.encoders.0.dropout=0"])
M = {}
for v in "AB":
    seed_everything(1)
    t = Tagger.build(config2, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    params = [q for q in t.net.parameters() if q.requires_grad]
    if v == "B":
        for m in t.net.modules():
            if isinstance(m, nn.Embedding) and m.num_embeddings > 1000: m.sparse = True
        M[v] = (t.net, params, {id(p): torch.zeros_like(p) for p in params})
    else:
        M[v] = (t.net, params, make_optimizer(params, config2.train))
    t.net.train()
models = M
for k in range(6):
    run("A", batches[k:k+1]); run("B", batches[k:k+1])
    print(k, max((p - q).abs().max().item() for p, q in zip(M["A"][1], M["B"][1])))
