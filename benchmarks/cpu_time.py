"""Process CPU seconds (not wall time: the host is shared and its wall-clock speed varies by +-25%),
1 torch thread, best of 5 passes: batch-1 tagging of 600 test sentences (one predict_tags call each),
batch-64 tagging of the test set, 200 training steps at batch 10; CoNLL-2000 chunking BiLSTM-CRF.

    PYTHONPATH=CHECKOUT python benchmarks/cpu_time.py [DATA_ROOT]     # run inside CHECKOUT

Prints sentences per CPU second. Runs on checkouts from before Stack v2 too (make_batches' old signature)."""

import json
import random
import sys
import time

import torch

torch.set_num_threads(1)
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything, train_step

config = load_config("configs/chunking-bilstm-crf.yaml")
seed_everything(1)
corpus = load_corpus(config.data, sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
test = corpus.test[:600]
enc = tagger.encode(corpus.train[:2000], with_tags=True)
try:
    batches = make_batches(enc, tagger.featurizers, 10, None, shuffle=True, rng=random.Random(1))[:200]
except AttributeError:
    batches = make_batches(enc, 10, None, shuffle=True, rng=random.Random(1))[:200]
params = [p for p in tagger.net.parameters() if p.requires_grad]
opt = make_optimizer(params, config.train)
for s in test[:50]:
    tagger.predict_tags([s], 1)
out = {"b1": [], "b64": [], "train": []}
for _rep in range(5):
    t0 = time.process_time()
    for s in test:
        tagger.predict_tags([s], 1)
    out["b1"].append(len(test) / (time.process_time() - t0))
    t0 = time.process_time()
    tagger.predict_tags(corpus.test, 64)
    out["b64"].append(len(corpus.test) / (time.process_time() - t0))
    tagger.net.train()
    t0 = time.process_time()
    for b in batches:
        train_step(tagger.net, b, opt, params, config.train)
    out["train"].append(sum(len(b.index) for b in batches) / (time.process_time() - t0))
print(json.dumps({k: max(v) for k, v in out.items()}))
