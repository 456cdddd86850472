"""What the step benchmarks (``speed.py``, ``step_profile.py``, ``op_count.py``, ``gpu_lever_ab.py``) build before
they time or count anything: a config's tagger on its corpus, its optimiser with the training loop's parameter groups
(a fine-tuned transformer's layers at their ``lr_scale``), and the training batches the loop would make, shuffled
with a fixed seed so that two runs time the same batches."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from seqlab.config import ExperimentConfig, load_config
from seqlab.data.batching import Batch, make_batches
from seqlab.data.corpus import Corpus, load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything
from seqlab.training.step import parameter_groups


@dataclass
class TrainingSetup:
    config: ExperimentConfig
    corpus: Corpus
    tagger: Tagger
    params: list[torch.Tensor]  # the trained parameters, for clipping (train_step's ``params``)
    optimizer: torch.optim.Optimizer
    batches: list[Batch]  # the first ``batches`` of one shuffled epoch, on the CPU


def training_setup(
    config_path: str, overrides: list[str], data_root: str | None, device: torch.device | str = "cpu", batches: int = 0
) -> TrainingSetup:
    """The config (with ``--set`` overrides) built as ``seqlab train`` builds it, on ``device``; ``batches``: how
    many training batches to keep (0: all)."""
    config = load_config(config_path, overrides)
    seed_everything(config.train.seed)
    corpus = load_corpus(config.data, data_root)
    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test, device)
    cfg = config.train
    made = make_batches(
        tagger.encode(corpus.train, with_tags=True),
        tagger.featurizers,
        cfg.batch_size,
        cfg.batch_tokens,
        shuffle=True,
        rng=random.Random(1),
        length=cfg.batch_length,
    )
    params = [q for q in tagger.net.parameters() if q.requires_grad]
    optimizer = make_optimizer(parameter_groups(tagger.net), cfg)
    return TrainingSetup(config, corpus, tagger, params, optimizer, made[:batches] if batches else made)
