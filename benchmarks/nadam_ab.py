import torch, random, time, statistics
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import seed_everything, train_step
from seqlab.optim import NAdam
torch.set_num_threads(2)
config = load_config("configs/chunking-bilstm-crf.yaml"); seed_everything(1)
corpus = load_corpus(config.data, "../shared/data")
cfg = config.train
batches = None
res = {}
for rep in range(5):
    for name in ("torch", "seqlab"):
        seed_everything(1)
        tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
        net = tagger.net; params = [q for q in net.parameters() if q.requires_grad]
        opt = torch.optim.NAdam(params, lr=cfg.lr, foreach=True) if name == "torch" else NAdam(params, lr=cfg.lr)
        if batches is None:
            batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, shuffle=True, rng=random.Random(1))[:150]
        net.train()
        for b in batches[:20]: train_step(net, b, opt, params, cfg)
        s = time.perf_counter()
        for b in batches[20:150]: train_step(net, b, opt, params, cfg)
        res.setdefault(name, []).append((time.perf_counter() - s) / 130 * 1000)
        if rep == 0: final = [p.detach().clone() for p in params]; res.setdefault("params", []).append(final)
print({k: [round(x, 2) for x in v] for k, v in res.items() if k != "params"})
print("same weights:", all(torch.equal(a, b) for a, b in zip(*res["params"])))
print("ratio", statistics.median(res["torch"]) / statistics.median(res["seqlab"]))
