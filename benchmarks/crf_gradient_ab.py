"""In-process A/B of the CRF log partition in whole training steps: autograd through the recorded forward
recursion ("old") against seqlab.crf_partition's closed-form gradient ("new"), alternated in blocks of 50
steps on the same batches, 6 pairs; CoNLL-2000 chunking BiLSTM-CRF, 2 threads.

    python benchmarks/crf_gradient_ab.py                                        # Nadam
    python benchmarks/crf_gradient_ab.py train.optimizer=sgd train.lr=0.015 train.clip=5.0
"""

import random
import statistics
import sys
import time

import torch

torch.set_num_threads(2)
from seqlab.config import load_config
from seqlab.crf import CRF
from seqlab.crf_partition import alpha_recursion
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step

new_impl = CRF._log_partition


def old_impl(self, emissions, mask):
    emissions, mask, _ = self._trim(emissions, mask)
    trans, start, end = self.potentials()
    alphas = alpha_recursion(emissions, trans, start, mask)  # recorded by autograd
    return torch.logsumexp(alphas[:, -1] + end, dim=1)


overrides = sys.argv[1:]
config = load_config("configs/chunking-bilstm-crf.yaml", overrides)
seed_everything(1)
corpus = load_corpus(config.data, "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
batches = make_batches(
    tagger.encode(corpus.train[:3000], with_tags=True), tagger.featurizers, 10, None, shuffle=True, rng=random.Random(1)
)[:50]
params = [p for p in tagger.net.parameters() if p.requires_grad]
opt = make_optimizer(params, config.train)
tagger.net.train()
res = {"old": [], "new": []}
for _rep in range(6):
    for name, impl in (("old", old_impl), ("new", new_impl)):
        CRF._log_partition = impl
        for b in batches[:5]:
            train_step(tagger.net, b, opt, params, config.train)
        t = time.perf_counter()
        for b in batches:
            train_step(tagger.net, b, opt, params, config.train)
        res[name].append(len(batches) * 10 / (time.perf_counter() - t))
print(
    overrides,
    {k: [round(x) for x in v] for k, v in res.items()},
    "median new/old",
    round(statistics.median(res["new"]) / statistics.median(res["old"]), 3),
    "per-pair",
    [round(n / o, 2) for o, n in zip(res["old"], res["new"])],
)
