"""The CPU recipe (BENCHMARKS.md, "Recipes"): the train section that the config generators write as a model's default,
where it trained better than the paper's own in the same minutes on this machine. Found on Resume (FLAT), then best or
level on CoNLL-2000 chunking and POS, CoNLL-2003 and OntoNotes 4, and for PSA, the three Li et al. models and GCDT."""

CPU_TRAIN = {
    "optimizer": "adam",
    "lr": 0.002,
    "lr_schedule": "linear",
    "warmup_fraction": 0.05,
    "clip": 5.0,
    "batch_size": 16,
    "max_epochs": 50,
    "patience": 50,
}
