"""Training: the loop, the optimisers, checkpoints, time budgets, weight averaging, data-parallel processes.

The names of the former module ``seqlab.training`` are re-exported here (``from seqlab.training import train``).
"""

from seqlab.training.loop import (FUSED_SGD, ROW_TABLES, Segment, TrainResult, clear_grads, clip_and_step, evaluate,
                                  learning_rate, make_optimizer, scores_dict, seed_everything, train, train_rank,
                                  train_seeds, train_step)

__all__ = ["FUSED_SGD", "ROW_TABLES", "Segment", "TrainResult", "clear_grads", "clip_and_step", "evaluate",
           "learning_rate", "make_optimizer", "scores_dict", "seed_everything", "train", "train_rank", "train_seeds",
           "train_step"]
