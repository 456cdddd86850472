"""Training: the loop, one optimisation step, the optimisers, checkpoints, time budgets, weight averaging and
data-parallel processes.

    from seqlab.training import train, evaluate

``runs`` (train, train_seeds, evaluate) -> ``distributed`` (launching ranks) -> ``loop`` (one process's run) ->
``step`` (one optimisation step), ``optim``, ``checkpoint``, ``budget``, ``averaging``, ``ranks``. Nothing below
the tagger imports this package.

The names of the former module ``seqlab.training`` are re-exported here. Its switches ``FUSED_SGD`` and
``ROW_TABLES`` are read where they live: set ``seqlab.training.step.FUSED_SGD``, not this package's copy.
"""

from seqlab.training.loop import Segment, TrainResult, scores_dict, train_rank
from seqlab.training.runs import evaluate, train, train_seeds
from seqlab.training.step import (
    FUSED_SGD,
    ROW_TABLES,
    clear_grads,
    clip_and_step,
    learning_rate,
    make_optimizer,
    seed_everything,
    train_step,
)

__all__ = [
    "FUSED_SGD",
    "ROW_TABLES",
    "Segment",
    "TrainResult",
    "clear_grads",
    "clip_and_step",
    "evaluate",
    "learning_rate",
    "make_optimizer",
    "scores_dict",
    "seed_everything",
    "train",
    "train_rank",
    "train_seeds",
    "train_step",
]
