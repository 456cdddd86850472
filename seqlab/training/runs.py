"""What ``seqlab train`` and ``seqlab evaluate`` run: one training run (in one process or several), a run per
seed, and the scores of a saved model on a labeled file.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from seqlab.config import ExperimentConfig
from seqlab.data.corpus import read_file
from seqlab.data.readers import write_conll
from seqlab.errors import SeqlabError
from seqlab.evaluation.metrics import Scores
from seqlab.io.files import atomic_write_json
from seqlab.tagger import Tagger
from seqlab.training import distributed
from seqlab.training.loop import TrainResult, train_rank
from seqlab.training.ranks import Ranks


def train(
    config: ExperimentConfig,
    out_dir: str | Path,
    data_root: str | None = None,
    resume: bool = False,
    progress: bool = True,
    nproc: int = 1,
) -> TrainResult:
    """Train one model; early stopping on the dev metric; the best model is saved to ``out_dir/model``.
    ``nproc`` > 1: DistributedDataParallel over that many processes, with the updates of one process."""
    if nproc != 1:
        return distributed.launch(config, out_dir, data_root, resume, progress, nproc)
    return train_rank(config, out_dir, data_root, resume, progress, Ranks())


def train_seeds(
    config: ExperimentConfig,
    out_dir: str | Path,
    seeds: list[int],
    data_root: str | None = None,
    resume: bool = False,
    progress: bool = True,
    nproc: int = 1,
) -> dict:
    """One run per seed in ``out_dir/seed-N`` (each on ``nproc`` processes); returns and writes mean, std and
    max of the dev/test metric."""
    out = Path(out_dir)
    results = []
    for seed in seeds:
        cfg = config.model_copy(update={"train": config.train.model_copy(update={"seed": seed})})
        results.append(train(cfg, out / f"seed-{seed}", data_root, resume, progress, nproc))
    metric = config.metric
    summary: dict = {"metric": metric, "seeds": seeds}
    for split in ("dev", "test"):
        values = [getattr(r, split)[metric] for r in results if getattr(r, split)]
        if values:
            summary[split] = {
                "values": values,
                "mean": statistics.fmean(values),
                "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                "max": max(values),
            }
    atomic_write_json(out / "summary.json", summary)
    return summary


def evaluate(
    model: Tagger | str | Path,
    data: str | Path,
    output: str | Path | None = None,
    batch_size: int | None = None,
    strict: bool = False,
    device: str = "cpu",
    beam: int | None = None,
    engine: str = "torch",
) -> Scores:
    """Score a model on a labeled file (read in the model's own data format); optionally write predictions.
    Gold labels unseen in training are scored as misses with a warning, or refused when ``strict``."""
    tagger = model if isinstance(model, Tagger) else Tagger.load(model, device, engine)
    if beam:
        tagger.set_beam(beam)
    sentences = read_file(Path(data), tagger.config.data)
    if any(s.labels is None for s in sentences):
        raise SeqlabError("evaluation needs gold labels", path=data)
    evaluation = tagger.evaluate(sentences, batch_size, "error" if strict else "warn")
    if output:
        write_conll(sentences, evaluation.predictions, output)
    return evaluation.scores
