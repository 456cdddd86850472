"""The training loop of one process (:func:`train_rank`): epochs of steps, dev scoring, the best model, checkpoints.

Layout of an output folder:
    model/              best-dev model (config.json, vocab.json, model.safetensors)
    checkpoint/         last epoch: model files + optimiser and trainer state (for --resume)
    log.jsonl           one JSON line per epoch: loss, lr, dev scores, seconds, sentences/s, tokens/s
    curves.png          loss and dev metric per epoch
    results.json        dev and test scores of the best model
    test.predictions.txt  conlleval-format predictions of the best model on the test set

Several processes (``nproc``) train data-parallel (:mod:`seqlab.training.distributed`): each runs this loop on its
share of every batch, rank 0 alone writing these files.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from seqlab.config import ExperimentConfig
from seqlab.data.batching import batch_groups
from seqlab.data.corpus import load_corpus
from seqlab.data.readers import write_conll
from seqlab.data.splitting import split_long
from seqlab.errors import SeqlabError
from seqlab.evaluation.metrics import Scores
from seqlab.evaluation.plotting import plot_curves
from seqlab.features.base import FeatureModule
from seqlab.io.files import append_line, atomic_write_json, atomic_write_text, recover_dir
from seqlab.runtime.devices import deterministic_algorithms, resolve_device
from seqlab.tagger import Tagger
from seqlab.training.averaging import WeightAverage
from seqlab.training.budget import Plan, RunClock
from seqlab.training.checkpoint import check_optimizer_state, load_checkpoint, save_checkpoint
from seqlab.training.ranks import Ranks
from seqlab.training.step import learning_rate, make_optimizer, parameter_groups, seed_everything, train_step

log = logging.getLogger("seqlab")


@dataclass
class TrainResult:
    """What a finished run reports; ``dev``/``test`` are the best model's scores."""

    out_dir: Path
    best_epoch: int
    dev: dict
    test: dict | None
    epochs_run: int
    train_sentences_per_s: float
    elapsed_s: float = 0.0  # wall-clock seconds of the whole run, earlier sessions' included


def scores_dict(scores: Scores) -> dict:
    """The headline numbers of a :class:`Scores`, for logs."""
    out: dict = scores.headline()
    if scores.per_type:
        out["per_type"] = {
            t: {"precision": s.precision, "recall": s.recall, "f1": s.f1} for t, s in scores.per_type.items()
        }
    return out


def train_rank(
    config: ExperimentConfig, out_dir: str | Path, data_root: str | None, resume: bool, progress: bool, ranks: Ranks
) -> TrainResult | None:
    """One process's part of :func:`train`: all of it, or a data-parallel rank's (None on ranks > 0)."""
    with deterministic_algorithms(config.train.deterministic):
        return _train_rank(config, out_dir, data_root, resume, progress, ranks)


def _train_rank(
    config: ExperimentConfig, out_dir: str | Path, data_root: str | None, resume: bool, progress: bool, ranks: Ranks
) -> TrainResult | None:
    clock = RunClock()  # the budget counts from here: loading the data and building the model included
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise SeqlabError("--out names a file; training writes a folder there", path=out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SeqlabError(f"cannot create the output folder: {err.strerror}", path=out) from None
    cfg = config.train
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    seed_everything(cfg.seed)
    device = ranks.place(resolve_device(cfg.device))
    corpus = load_corpus(config.data, data_root)
    if cfg.max_length:
        corpus.train, split = split_long(corpus.train, cfg.max_length, corpus.scheme)
        if split:
            log.info(
                "split %d training sentences longer than %d tokens (train.max_length) into pieces: "
                "%d training sentences now",
                split,
                cfg.max_length,
                len(corpus.train),
            )
    metric = config.metric
    ckpt_dir = out / "checkpoint"
    extra: dict[str, torch.Tensor] = {}  # tensors the checkpoint holds besides model and optimiser
    for folder in (out / "model", ckpt_dir):  # a kill inside a folder swap leaves both copies beside it
        note = recover_dir(folder) if ranks.main else None
        if note:
            log.warning(note)
    ranks.barrier()  # the other ranks read the checkpoint once rank 0 has put it back
    model_started = time.perf_counter()  # what building or loading the model costs: the final reload's bound
    if resume and (ckpt_dir / "trainer.json").is_file():
        tagger = Tagger.load(ckpt_dir, device)
        model_seconds = time.perf_counter() - model_started  # the model alone, as the final reload loads it
        if tagger.config.model != config.model or tagger.config.data != config.data:
            section = "model" if tagger.config.model != config.model else "data"
            raise SeqlabError(
                f"--resume: the config's {section} section differs from the checkpoint's; a run "
                f"resumes with the {section} it started with (change only train.* keys)",
                path=ckpt_dir,
            )
        checkpoint = load_checkpoint(ckpt_dir)
        state, extra = checkpoint.trainer, checkpoint.extra
        optimizer = make_optimizer(parameter_groups(tagger.net), cfg, ranks.world == 1)
        trained_with = state.pop("optimizer_type", None)
        if trained_with not in (None, type(optimizer).__name__):
            raise SeqlabError(
                f"--resume: the checkpoint was trained with {trained_with}, the config asks for "
                f"train.optimizer={cfg.optimizer}; resume with the optimiser it was trained with",
                path=ckpt_dir,
            )
        check_optimizer_state(optimizer, checkpoint.optimizer, ckpt_dir)
        try:
            optimizer.load_state_dict(checkpoint.optimizer)
        except (ValueError, KeyError, RuntimeError) as err:
            raise SeqlabError(
                f"--resume: the checkpoint's optimiser state does not fit train.optimizer="
                f"{cfg.optimizer} ({err}); resume with the optimiser it was trained with",
                path=ckpt_dir,
            ) from None
        checkpoint.restore_rng(device)
        if ranks.main:
            _trim_log(out / "log.jsonl", state["history"])
        clock.before = state.get("elapsed", 0.0)  # time already spent counts against a budget
        log.info(
            "resuming from %s after epoch %d, step %d (%.0f s spent)",
            ckpt_dir,
            state["epoch"],
            state.get("step_in_epoch", 0),
            clock.before,
        )
    else:
        if resume and (out / "log.jsonl").exists():
            raise SeqlabError(
                f"--resume: no checkpoint in {ckpt_dir}, but log.jsonl records a run: refusing to "
                f"start it over (train without --resume, or into a new --out)",
                path=out,
            )
        if resume:
            log.warning("no checkpoint in %s: starting from scratch", ckpt_dir)
        if ranks.main and (out / "log.jsonl").exists():
            (out / "log.jsonl").unlink()
        tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test, device)
        model_seconds = time.perf_counter() - model_started
        optimizer = make_optimizer(parameter_groups(tagger.net), cfg, ranks.world == 1)
        state = {
            "epoch": 0,
            "step_in_epoch": 0,
            "steps": 0,
            "elapsed": 0.0,
            "best": -math.inf,
            "best_epoch": 0,
            "bad_epochs": 0,
            "history": [],
        }
        out.mkdir(parents=True, exist_ok=True)
        if ranks.main:
            atomic_write_text(out / "config.json", json.dumps(config.model_dump(mode="json"), indent=2))
    net = tagger.net
    params = [p for p in net.parameters() if p.requires_grad]
    extra = ranks.own_rng(extra, cfg.seed, device)  # ranks > 0: dropout masks of their own
    average = WeightAverage(net, cfg.ema_decay) if cfg.ema_decay and ranks.main else None
    if average and extra:  # resuming: the average goes on from where it was
        average.load_state_tensors(extra)
    trained = ranks.replicate(tagger)  # what the steps call .loss on: the network, or DDP around it
    tagger.link(corpus.train)  # in file order: the sentences around each, for features that read them
    train_enc = tagger.encode(corpus.train, with_tags=True)
    for name, split in (("dev", corpus.dev), ("test", corpus.test)):
        unseen = tagger.unseen_labels(split)
        if unseen:  # e.g. CoNLL-2000 test has LST chunks that training never shows: conlleval counts them
            log.warning("%s labels unseen in training, scored as misses: %s", name, dict(unseen))
    n_tokens = sum(e.length for e in train_enc)
    log.info(
        "train %d sentences (%d tokens), dev %d, test %d; %d labels (%s scheme, trained as %s); %d parameters",
        len(train_enc),
        n_tokens,
        len(corpus.dev),
        len(corpus.test),
        len(tagger.tags),
        corpus.scheme,
        tagger.train_scheme,
        sum(p.numel() for p in params),
    )

    features = [m for m in net.modules() if isinstance(m, FeatureModule)]
    # dev scoring sees the same sentences every epoch (seqlab.features.contextual): memos make later scorings cheaper
    memos = [feature.remember_for_scoring(True) for feature in features]
    budget = cfg.budget_seconds
    per_epoch = len(
        batch_groups(
            train_enc,
            cfg.batch_size,
            cfg.batch_tokens,
            shuffle=True,
            rng=random.Random(cfg.seed * 100_003),
            length=cfg.batch_length,
        )
    )
    plan = Plan(
        budget,
        cfg.max_epochs * per_epoch,
        cfg.budget_evals,
        _token_ratio(corpus.test, corpus.dev),
        clock,
        any(memos),
        model_seconds,
    )
    plan.remember(state.get("costs"))
    if budget is not None:
        log.info(
            "budget %.0f s (%.0f s spent before): dev scored every %.0f s or more, patience not applied",
            budget,
            clock.before,
            budget / cfg.budget_evals,
        )
    done = state.get("steps")  # optimiser steps so far; None in checkpoints older than the count
    if done is None:
        done = state["epoch"] * per_epoch
    segment = Segment()
    # a resumed run that had ended (its plan done, its budget spent, or patience) goes on to the final scoring only;
    # a budget's end is kept as it was decided, not decided again on costs measured since (a faster last scoring)
    stop = bool(state["history"]) and (
        plan.finished(done)
        or (budget is not None and budget <= (state.get("ended_budget") or 0.0))
        or state["epoch"] >= cfg.max_epochs
        or (budget is None and state["bad_epochs"] >= cfg.patience)
    )
    while not stop:
        epoch, first = state["epoch"], state.get("step_in_epoch", 0)
        groups = batch_groups(
            train_enc,
            cfg.batch_size,
            cfg.batch_tokens,
            shuffle=True,
            rng=random.Random(cfg.seed * 100_003 + epoch),
            length=cfg.batch_length,
        )
        batches = ranks.shard(groups, train_enc, tagger.featurizers, cfg.loss_reduction)  # this rank's part of each
        net.train()
        per_step = cfg.per_step_rate or (cfg.warmup_epochs and epoch < cfg.warmup_epochs)
        bar = tqdm(
            range(first, len(batches)),
            desc=f"epoch {epoch + 1}",
            disable=not progress,
            leave=False,
            mininterval=0.5,
            unit="batch",
        )
        for step in bar:
            if per_step or step == first:
                rate = learning_rate(cfg, epoch, step, len(batches), done, plan.progress(done))
                for group in optimizer.param_groups:
                    group["lr"] = rate * group.get("lr_scale", 1.0)
            shard, started = batches[step], time.perf_counter()
            losses = train_step(trained, shard.batch.to(device), optimizer, params, cfg, shard.scale)
            loss = float(losses.sum())
            if not math.isfinite(loss):
                raise _diverged(f"the loss is {loss} at epoch {epoch + 1}, step {step + 1}", out)
            if average:
                average.update(net)
            plan.costs.add_step(time.perf_counter() - started)
            segment.add(loss if shard.counted else 0.0, groups[step], train_enc, time.perf_counter() - started)
            done += 1
            epoch_end = step + 1 == len(batches)
            state.update(epoch=epoch + epoch_end, step_in_epoch=0 if epoch_end else step + 1, steps=done)
            decide = (plan.eval_due(epoch_end, done), plan.finished(done))
            if budget is not None:  # the clock decides: rank 0's reading for every rank
                decide = ranks.broadcast(decide)
            if not (decide[0] or decide[1] or (not state["history"] and epoch_end)):
                continue
            epochs = epoch + 1 if epoch_end else round(epoch + (step + 1) / len(batches), 3)
            if decide[1] and budget is not None and done < plan.total_steps:
                state["ended_budget"] = budget  # the clock ended it: resuming with this budget trains no more
            state = _score(
                tagger,
                corpus.dev,
                metric,
                state,
                segment.record(epochs, ranks),
                plan,
                average,
                out,
                ranks,
                device,
                optimizer,
                clock,
            )
            segment = Segment()
            net.train()  # scoring dev left it in eval mode: dropout back on for the rest of the epoch
            if len(state["history"]) == 1 and (finish := plan.steps_end_early(done)) is not None:
                log.warning(
                    "at this pace train.max_epochs (%d) ends training after about %.0f s of the %.0f s budget; "
                    "dev is scored over that time, and the rest of the budget is not used",
                    cfg.max_epochs,
                    finish,
                    budget,
                )
            stop = decide[1] or (budget is None and state["bad_epochs"] >= cfg.patience)
            if stop:
                break
        bar.close()
        stop = stop or state["epoch"] >= cfg.max_epochs

    for feature in features:
        feature.remember_for_scoring(False)
    if not ranks.main:
        return None

    history = state["history"]
    plot_curves(history, out / "curves.png", metric)
    started = time.perf_counter()
    best = Tagger.load(out / "model", device)
    loaded = time.perf_counter() - started
    dev = state.get("best_dev") or scores_dict(best.evaluate(corpus.dev, unseen="score").scores)
    test = None
    if corpus.test:
        started = time.perf_counter()
        evaluation = best.evaluate(corpus.test, unseen="score")
        test = scores_dict(evaluation.scores)
        write_conll(corpus.test, evaluation.predictions, out / "test.predictions.txt")
        if budget is not None:  # what the plan's end kept for these against what they took
            log.info(
                "the best model loaded in %.1f s (planned %.1f s), test scored in %.1f s (planned %.1f s)",
                loaded,
                plan.reload,
                time.perf_counter() - started,
                plan.test_scoring(),
            )
    speeds = [h["sentences_per_s"] for h in history if h.get("sentences_per_s")]
    results = {
        "best_epoch": state["best_epoch"],
        "epochs_run": state["epoch"],
        "metric": metric,
        "dev": dev,
        "test": test,
        "seed": cfg.seed,
        "train_sentences_per_s": round(statistics.fmean(speeds), 1) if speeds else None,
        "steps": done,
        "budget_s": budget,
        "elapsed_s": round(clock.elapsed(), 1),
    }
    atomic_write_json(out / "results.json", results)
    return TrainResult(
        out,
        state["best_epoch"],
        results["dev"],
        test,
        state["epoch"],
        results["train_sentences_per_s"] or 0.0,
        results["elapsed_s"],
    )


@dataclass
class Segment:
    """The training since the last dev scoring: summed loss, sentences, tokens, seconds of steps."""

    loss: float = 0.0
    sentences: int = 0
    tokens: int = 0
    seconds: float = 0.0

    def add(self, loss: float, group: list[int], items, seconds: float) -> None:
        self.loss += loss
        self.sentences += len(group)
        self.tokens += sum(items[i].length for i in group)
        self.seconds += seconds

    def record(self, epochs: int | float, ranks: Ranks) -> dict:
        """The log record's training part (collective: the loss of every rank's sentences)."""
        seconds = max(self.seconds, 1e-9)
        return {
            "epoch": epochs,
            "loss": ranks.sum(self.loss) / max(self.sentences, 1),
            "seconds": round(self.seconds, 3),
            "sentences_per_s": round(self.sentences / seconds, 1),
            "tokens_per_s": round(self.tokens / seconds, 1),
        }


def _score(
    tagger: Tagger,
    dev_set,
    metric: str,
    state: dict,
    record: dict,
    plan: Plan,
    average,
    out: Path,
    ranks: Ranks,
    device,
    optimizer,
    clock: RunClock,
) -> dict:
    """Score dev, keep the model if it is the best so far, log a record and write the checkpoint; every rank
    calls it and gets rank 0's counters back."""
    rank_rngs = ranks.rng_states(device)  # for the checkpoint
    if not ranks.main:  # rank 0 alone scores dev, logs and saves; the others take its counters
        return ranks.broadcast(state)
    bad = [name for name, p in tagger.net.named_parameters() if not torch.isfinite(p).all()]
    if bad:
        raise _diverged(f"non-finite weights ({bad[0]}) at epoch {record['epoch']}", out)
    scored = average.swapped_into(tagger) if average else contextlib.nullcontext()
    with scored:  # the dev score and the best model: averaged weights if there is an average
        started = time.perf_counter()
        dev = scores_dict(tagger.evaluate(dev_set, unseen="score").scores)
        dev_seconds = time.perf_counter() - started
        plan.scored(dev_seconds)
        started = time.perf_counter()  # the writes from here on: the best model, the log and the checkpoint
        improved = dev[metric] > state["best"]
        if improved:
            tagger.save(out / "model")
    record = {
        **record,
        "lr": optimizer.param_groups[0]["lr"],
        "dev": dev,
        "dev_seconds": round(dev_seconds, 3),  # as measured (the plan keeps a refill's apart)
        "elapsed": round(clock.elapsed(), 1),
    }
    if improved:
        state.update(best=dev[metric], best_epoch=record["epoch"], best_dev=dev, bad_epochs=0)
    else:
        state["bad_epochs"] += 1
    state["history"].append(record)
    state.update(elapsed=record["elapsed"], costs=plan.measured())
    append_line(out / "log.jsonl", json.dumps(record))
    save_checkpoint(
        out / "checkpoint", tagger, optimizer, state, {**(average.state_tensors() if average else {}), **rank_rngs}
    )
    plan.saved(time.perf_counter() - started)
    log.info(
        "epoch %s  loss %.3f  dev %s %.2f%s  %.0f s  %.1fs (%.0f sent/s)",
        record["epoch"],
        record["loss"],
        metric,
        dev[metric],
        " *" if improved else "",
        record["elapsed"],
        record["seconds"],
        record["sentences_per_s"],
    )
    return ranks.broadcast(state)


def _diverged(what: str, out: Path) -> SeqlabError:
    """The one line for a run that diverged: nothing after the last dev scoring was written."""
    return SeqlabError(
        f"training diverged: {what}; nothing from this point was saved, {out / 'model'} and the checkpoint hold "
        f"the last good state (lower train.lr, or set train.clip)"
    )


def _token_ratio(test, dev) -> float:
    """Tokens of the test set over those of dev: the final scoring's cost in dev scorings."""
    return sum(len(s.tokens) for s in test or []) / max(sum(len(s.tokens) for s in dev), 1)


def _trim_log(path: Path, history: list[dict]) -> None:
    """Make the log hold exactly the records the checkpoint covers (one per dev scoring): a kill between the log
    append and the checkpoint save leaves one more line, for steps the resumed run trains again, and a kill inside
    an append a cut line. The checkpoint's history is the truth; the log is rewritten from it when they differ."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    records = [json.dumps(h) for h in history]
    if lines != records:
        log.warning(
            "log.jsonl: %d line(s) where the checkpoint has %d records (a kill between the log and the "
            "checkpoint, or inside an append): rewritten from the checkpoint; steps after it are trained "
            "again",
            len(lines),
            len(records),
        )
        atomic_write_text(path, "".join(line + "\n" for line in records))
