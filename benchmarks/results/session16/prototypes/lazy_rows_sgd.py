"""Upper bound of a rows-only momentum update of the word table: A = the fused SGD over every parameter; B = the fused
SGD over every parameter but the word table, whose touched rows alone get buf = m buf + c g, p -= lr buf (the idle
rows' momentum decay is left out, so B is not a correct optimiser: it bounds what a correct lazy one could save)."""
import random, statistics, time, torch
torch.set_num_threads(2)
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step, clip_and_step
config = load_config("/work/main/configs/chunking-bilstm-crf.yaml", ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"])
seed_everything(1)
corpus = load_corpus(config.data, "/work/shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
net, cfg = tagger.net, config.train
params = [q for q in net.parameters() if q.requires_grad]
table = net.embedder.word.embed.weight
if table is None:
    table = max(params, key=lambda q: q.numel())
print("table", tuple(table.shape))
opt_a = make_optimizer(params, cfg)
rest = [q for q in params if q is not table]
opt_b = make_optimizer(rest, cfg)
buf = torch.zeros_like(table)
batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None, shuffle=True, rng=random.Random(1))[:600]
net.train()
last = torch.zeros(table.shape[0], dtype=torch.long)
t = [0]
mu = cfg.momentum
def catch_up(rows):
    with torch.no_grad():
        k = (t[0] - last.index_select(0, rows)).to(torch.float32)  # (rows,)
        muk = torch.pow(mu, k)
        s = mu * (1 - muk) / (1 - mu)
        b = buf.index_select(0, rows)
        table.index_add_(0, rows, b * s[:, None], alpha=-opt_b.param_groups[0]["lr"])
        buf.index_copy_(0, rows, b * muk[:, None])
        last.index_fill_(0, rows, t[0])
def step_b(batch):
    rows = batch.features["word"]["ids"].unique()
    catch_up(rows)
    losses = net.loss(batch)
    loss = losses.sum() if cfg.loss_reduction == "sum" else losses.mean()
    opt_b.zero_grad(set_to_none=True); table.grad = None
    loss.backward()
    norm = torch.nn.utils.get_total_norm([q.grad for q in params if q.grad is not None])
    c = float(min(1.0, cfg.clip / (float(norm) + 1e-6)))
    with torch.no_grad():
        g = table.grad.index_select(0, rows)
        b = buf.index_select(0, rows).mul_(cfg.momentum).add_(g, alpha=c)
        buf.index_copy_(0, rows, b)
        table.index_add_(0, rows, b, alpha=-opt_b.param_groups[0]["lr"])
    t[0] += 1; last.index_fill_(0, rows, t[0])
    clip_and_step(opt_b, rest, cfg.clip)  # the rest clipped by their own norm: close enough for timing
for b in batches[:30]:
    train_step(net, b, opt_a, params, cfg); step_b(b)
ra, rb = [], []
for block in range(10):
    part = batches[30 + block * 50: 30 + block * 50 + 50]
    s = time.perf_counter()
    for b in part: train_step(net, b, opt_a, params, cfg)
    ra.append(len(part) / (time.perf_counter() - s))
    s = time.perf_counter()
    for b in part: step_b(b)
    rb.append(len(part) / (time.perf_counter() - s))
print("dense steps/s", round(statistics.median(ra), 1), "rows only", round(statistics.median(rb), 1), "ratio", round(statistics.median(b / a for a, b in zip(ra, rb)), 3))
