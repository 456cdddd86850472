"""The NCRF++-size chunker (configs/chunking-bilstm-crf.yaml, seed 1) and its shuffled training batches, as the
seventeenth session's training prototypes measured it. Run them from the repository root with PYTHONPATH=.:this folder."""
import random

import torch

from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import seed_everything

SGD = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"]  # the papers' SGD setting


def chunker(overrides=(), threads=2):
    """(network in training mode, train config, trainable parameters, batches)."""
    torch.set_num_threads(threads)
    config = load_config("configs/chunking-bilstm-crf.yaml", list(overrides))
    seed_everything(1)
    corpus = load_corpus(config.data, "../shared/data")
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    net, cfg = tagger.net, config.train
    batches = make_batches(tagger.encode(corpus.train, with_tags=True), tagger.featurizers, cfg.batch_size, None,
                           shuffle=True, rng=random.Random(1))
    net.train()
    return net, cfg, [q for q in net.parameters() if q.requires_grad], batches
