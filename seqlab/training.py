"""The training loop, multi-seed runs and evaluation of saved models.

Layout of an output folder:
    model/              best-dev model (config.json, vocab.json, model.safetensors)
    checkpoint/         last epoch: model files + optimiser and trainer state (for --resume)
    log.jsonl           one JSON line per epoch: loss, lr, dev scores, seconds, sentences/s, tokens/s
    curves.png          loss and dev metric per epoch
    results.json        dev and test scores of the best model
    test.predictions.txt  conlleval-format predictions of the best model on the test set

Several processes (``nproc``) train data-parallel (seqlab.distributed): each on its share of every batch,
rank 0 alone writing these files.
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

import numpy as np
import torch
from tqdm import tqdm

from seqlab.averaging import WeightAverage
from seqlab.checkpoint import load_checkpoint, save_checkpoint
from seqlab.config import ExperimentConfig, TrainConfig
from seqlab.data.batching import batch_groups
from seqlab.data.corpus import load_corpus, read_file
from seqlab.data.readers import write_conll
from seqlab.data.splitting import split_long
from seqlab.devices import deterministic_algorithms, resolve_device
from seqlab.distributed import Ranks
from seqlab.errors import SeqlabError
from seqlab.features.base import FeatureModule
from seqlab.io import append_line, atomic_write_json, atomic_write_text, recover_dir
from seqlab.metrics import Scores
from seqlab.optim import SGD, NAdam
from seqlab.plotting import plot_curves
from seqlab.tagger import Tagger

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


def make_optimizer(params, cfg: TrainConfig, row_tables: bool = True) -> torch.optim.Optimizer:
    # foreach: one multi-tensor update over all parameters instead of a per-tensor loop (PyTorch's
    # default on CPU). A small gain: NAdam's step on the chunking model went from 5.3 to 5.0 ms (of an
    # 18 ms batch-10 training step; most of it is the dense update of the word embedding matrix).
    if cfg.optimizer == "sgd":
        # fused: PyTorch's one-kernel update (CPU from torch 2.4), which also takes train_step's clipping factor
        # (see clip_and_step); where the installed torch or the device has none, the multi-tensor update
        # row_tables: embedding tables updated by the rows a batch read (seqlab.rows), unless weight averaging reads
        # every weight after each step
        params, sgd = list(params), {"lr": cfg.lr, "momentum": cfg.momentum, "weight_decay": cfg.weight_decay,
                                     "row_tables": row_tables and ROW_TABLES and not cfg.ema_decay}
        if FUSED_SGD and hasattr(torch.nn.utils, "get_total_norm"):
            try:
                return SGD(params, fused=True, **sgd)  # torch's, counting its writes (see seqlab.optim.SGD)
            except RuntimeError:
                pass
        return SGD(params, foreach=True, **sgd)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, eps=cfg.adam_eps, weight_decay=cfg.weight_decay, foreach=True)
    return NAdam(params, lr=cfg.lr, eps=cfg.adam_eps, weight_decay=cfg.weight_decay)  # torch's update, fused on CPU


def train_step(net, batch, optimizer: torch.optim.Optimizer, params, cfg: TrainConfig,
               scale: float | None = None) -> torch.Tensor:
    """One optimisation step on one batch (loss, backward, clipping, update): the per-sentence
    losses, shape (batch,), detached. ``scale``: a data-parallel rank's weight of its summed loss
    (:class:`seqlab.distributed.Shard`); None: the batch's sum or mean, as ``cfg.loss_reduction`` says."""
    losses = net.loss(batch)  # (batch,)
    if scale is None:
        loss = losses.sum() if cfg.loss_reduction == "sum" else losses.mean()
    else:
        loss = losses.sum() * scale
    clear_grads(optimizer)
    loss.backward()
    clip_and_step(optimizer, params, cfg.clip)
    return losses.detach()


#: Whether make_optimizer builds PyTorch's fused SGD where it can (tests and benchmarks compare with foreach).
FUSED_SGD = True
#: Whether make_optimizer's SGD updates embedding tables by rows (seqlab.rows; benchmarks compare with the dense update).
ROW_TABLES = True


def clear_grads(optimizer: torch.optim.Optimizer) -> None:
    """``optimizer.zero_grad(set_to_none=True)``'s effect, every gradient None, without its profiler label and
    dispatch wrapper (about 150 against 30 us a step on the chunker's 18 tensors)."""
    for group in optimizer.param_groups:
        for p in group["params"]:
            p.grad = None


def clip_and_step(optimizer: torch.optim.Optimizer, params, clip: float | None) -> None:
    """Scale the gradients to a total norm of at most ``clip`` (as ``clip_grad_norm_``: factor clip / (norm +
    1e-6) when below 1), then the optimiser's step. A fused SGD, and seqlab's NAdam where its step runs fused,
    take the factor's inverse as their ``grad_scale`` and divide each gradient by it inside their update, which
    saves a pass over every gradient (the word table's included); the same update to float rounding."""
    fused = (isinstance(optimizer, torch.optim.SGD) and all(group.get("fused") for group in optimizer.param_groups)
             or isinstance(optimizer, (NAdam, SGD)) and optimizer.takes_grad_scale())
    fused = fused and hasattr(torch.nn.utils, "get_total_norm")  # torch >= 2.6; else clip_grad_norm_ first
    grads = [_norm_part(q) for q in params if q.grad is not None] if clip and fused else []
    if grads and len({g.dtype for g in grads}) == 1:  # its grad_scale: one dtype
        norm = torch.nn.utils.get_total_norm(grads)
        optimizer.grad_scale = (norm + 1e-6).div_(clip).clamp_(min=1.0)  # 1 / clip_grad_norm_'s factor
        try:
            optimizer.step()
        finally:
            del optimizer.grad_scale
        return
    if clip:
        grads = [_norm_part(q) for q in params if q.grad is not None]
        if any(q.grad is not None and q.grad.is_sparse for q in params):  # clip_grad_norm_ takes no sparse
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g).double() for g in grads]))
            factor = clip / (float(norm) + 1e-6)
            if factor < 1.0:
                torch._foreach_mul_(grads, factor)  # a sparse gradient's values are its own
        else:
            torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()


def _norm_part(q: torch.Tensor) -> torch.Tensor:
    """The values whose norm is ``q.grad``'s: a row-sparse gradient (seqlab.rows) coalesced, in place of ``q.grad``."""
    if q.grad.is_sparse:
        q.grad = q.grad.coalesce()
        return q.grad.values()
    return q.grad


def learning_rate(cfg: TrainConfig, epoch: int, step: int = 0, steps: int = 1, done: int | None = None) -> float:
    """The rate for step ``step`` of ``steps`` in epoch ``epoch`` (0-based), ``done`` optimiser steps before it
    in the whole run (default ``epoch * steps + step``).

    ``inverse_time``: lr_0 / (1 + rho * t), t = epochs completed (the PSA paper's schedule).
    ``step_halving``: lr_0 * 0.5 ** (max(0, done - hold) / half_life), at least ``lr_min`` (GCDT's code).
    Either is multiplied by a linear warm-up min(1, (epoch * steps + step + 1) / (warmup_epochs * steps))
    when ``warmup_epochs`` > 0."""
    if done is None:
        done = epoch * steps + step
    if cfg.lr_schedule == "step_halving":
        lr = max(cfg.lr * 0.5 ** (max(0, done - cfg.lr_hold_steps) / cfg.lr_half_life_steps), cfg.lr_min)
    else:
        lr = cfg.lr / (1.0 + cfg.lr_decay * epoch)
    if cfg.warmup_epochs:
        lr *= min(1.0, (epoch * steps + step + 1) / (cfg.warmup_epochs * steps))
    return lr


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def scores_dict(scores: Scores) -> dict:
    """The headline numbers of a :class:`Scores`, for logs."""
    out: dict = scores.headline()
    if scores.per_type:
        out["per_type"] = {t: {"precision": s.precision, "recall": s.recall, "f1": s.f1}
                           for t, s in scores.per_type.items()}
    return out


def train(config: ExperimentConfig, out_dir: str | Path, data_root: str | None = None, resume: bool = False,
          progress: bool = True, nproc: int = 1) -> TrainResult:
    """Train one model; early stopping on the dev metric; the best model is saved to ``out_dir/model``.
    ``nproc`` > 1: DistributedDataParallel over that many processes, with the updates of one process."""
    if nproc != 1:
        from seqlab.distributed import launch
        return launch(config, out_dir, data_root, resume, progress, nproc)
    return train_rank(config, out_dir, data_root, resume, progress, Ranks())


def train_rank(config: ExperimentConfig, out_dir: str | Path, data_root: str | None, resume: bool, progress: bool,
               ranks: Ranks) -> TrainResult | None:
    """One process's part of :func:`train`: all of it, or a data-parallel rank's (None on ranks > 0)."""
    with deterministic_algorithms(config.train.deterministic):
        return _train_rank(config, out_dir, data_root, resume, progress, ranks)


def _train_rank(config: ExperimentConfig, out_dir: str | Path, data_root: str | None, resume: bool, progress: bool,
                ranks: Ranks) -> TrainResult | None:
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
            log.info("split %d training sentences longer than %d tokens (train.max_length) into pieces: "
                     "%d training sentences now", split, cfg.max_length, len(corpus.train))
    metric = config.metric
    ckpt_dir = out / "checkpoint"
    extra: dict[str, torch.Tensor] = {}  # tensors the checkpoint holds besides model and optimiser
    for folder in (out / "model", ckpt_dir):  # a kill inside a folder swap leaves both copies beside it
        note = recover_dir(folder) if ranks.main else None
        if note:
            log.warning(note)
    ranks.barrier()  # the other ranks read the checkpoint once rank 0 has put it back
    if resume and (ckpt_dir / "trainer.json").is_file():
        tagger = Tagger.load(ckpt_dir, device)
        if tagger.config.model != config.model or tagger.config.data != config.data:
            section = "model" if tagger.config.model != config.model else "data"
            raise SeqlabError(f"--resume: the config's {section} section differs from the checkpoint's; a run "
                              f"resumes with the {section} it started with (change only train.* keys)", path=ckpt_dir)
        checkpoint = load_checkpoint(ckpt_dir)
        state, extra = checkpoint.trainer, checkpoint.extra
        optimizer = make_optimizer([p for p in tagger.net.parameters() if p.requires_grad], cfg, ranks.world == 1)
        trained_with = state.pop("optimizer_type", None)
        if trained_with not in (None, type(optimizer).__name__):
            raise SeqlabError(f"--resume: the checkpoint was trained with {trained_with}, the config asks for "
                              f"train.optimizer={cfg.optimizer}; resume with the optimiser it was trained with",
                              path=ckpt_dir)
        try:
            optimizer.load_state_dict(checkpoint.optimizer)
        except (ValueError, KeyError, RuntimeError) as err:
            raise SeqlabError(f"--resume: the checkpoint's optimiser state does not fit train.optimizer="
                              f"{cfg.optimizer} ({err}); resume with the optimiser it was trained with",
                              path=ckpt_dir) from None
        checkpoint.restore_rng(device)
        if ranks.main:
            _trim_log(out / "log.jsonl", state["epoch"])
        log.info("resuming from %s after epoch %d", ckpt_dir, state["epoch"])
    else:
        if resume and (out / "log.jsonl").exists():
            raise SeqlabError(f"--resume: no checkpoint in {ckpt_dir}, but log.jsonl records a run: refusing to "
                              f"start it over (train without --resume, or into a new --out)", path=out)
        if resume:
            log.warning("no checkpoint in %s: starting from scratch", ckpt_dir)
        if ranks.main and (out / "log.jsonl").exists():
            (out / "log.jsonl").unlink()
        tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test, device)
        optimizer = make_optimizer([p for p in tagger.net.parameters() if p.requires_grad], cfg, ranks.world == 1)
        state = {"epoch": 0, "best": -math.inf, "best_epoch": 0, "bad_epochs": 0, "history": []}
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
    train_enc = tagger.encode(corpus.train, with_tags=True)
    for name, split in (("dev", corpus.dev), ("test", corpus.test)):
        unseen = tagger.unseen_labels(split)
        if unseen:  # e.g. CoNLL-2000 test has LST chunks that training never shows: conlleval counts them
            log.warning("%s labels unseen in training, scored as misses: %s", name, dict(unseen))
    n_tokens = sum(e.length for e in train_enc)
    log.info("train %d sentences (%d tokens), dev %d, test %d; %d labels (%s scheme, trained as %s); %d parameters",
             len(train_enc), n_tokens, len(corpus.dev), len(corpus.test), len(tagger.tags), corpus.scheme,
             tagger.train_scheme, sum(p.numel() for p in params))

    speeds = []
    features = [m for m in net.modules() if isinstance(m, FeatureModule)]
    for feature in features:  # dev scoring sees the same sentences every epoch (seqlab.features.contextual)
        feature.remember_for_scoring(True)
    while state["epoch"] < cfg.max_epochs and state["bad_epochs"] < cfg.patience:
        epoch = state["epoch"]
        done = state.get("steps")  # optimiser steps before this epoch; None in checkpoints older than the count
        groups = batch_groups(train_enc, cfg.batch_size, cfg.batch_tokens, shuffle=True,
                              rng=random.Random(cfg.seed * 100_003 + epoch), length=cfg.batch_length)
        batches = ranks.shard(groups, train_enc, tagger.featurizers, cfg.loss_reduction)  # this rank's part of each
        net.train()
        total_loss, start = 0.0, time.perf_counter()
        bar = tqdm(batches, desc=f"epoch {epoch + 1}/{cfg.max_epochs}", disable=not progress, leave=False,
                   mininterval=0.5, unit="batch")
        if done is None:
            done = epoch * len(batches)
        per_step = cfg.lr_schedule == "step_halving" or (cfg.warmup_epochs and epoch < cfg.warmup_epochs)
        for step, shard in enumerate(bar):
            if per_step or step == 0:
                for group in optimizer.param_groups:
                    group["lr"] = learning_rate(cfg, epoch, step, len(batches), done + step)
            losses = train_step(trained, shard.batch.to(device), optimizer, params, cfg, shard.scale)
            total_loss += float(losses.sum()) if shard.counted else 0.0
            if average:
                average.update(net)
        total_loss = ranks.sum(total_loss)  # every rank's sentences
        train_seconds = time.perf_counter() - start
        rank_rngs = ranks.rng_states(device)  # for the checkpoint
        if not ranks.main:  # rank 0 alone scores dev, logs and saves; the others take its counters
            state = ranks.broadcast(state)
            continue
        scored = average.swapped_into(tagger) if average else contextlib.nullcontext()
        with scored:  # the dev score and the best model: averaged weights if there is an average
            dev_start = time.perf_counter()
            dev_scores = tagger.evaluate(corpus.dev, unseen="score").scores
            dev_seconds = time.perf_counter() - dev_start
            dev = scores_dict(dev_scores)
            value = dev[metric]
            improved = value > state["best"]
            if improved:
                tagger.save(out / "model")
        record = {"epoch": epoch + 1, "loss": total_loss / len(train_enc), "lr": optimizer.param_groups[0]["lr"],
                  "dev": dev, "seconds": round(train_seconds, 3),
                  "dev_seconds": round(dev_seconds, 3),
                  "sentences_per_s": round(len(train_enc) / train_seconds, 1),
                  "tokens_per_s": round(n_tokens / train_seconds, 1)}
        speeds.append(record["sentences_per_s"])
        state["epoch"] = epoch + 1
        state["steps"] = done + len(batches)
        if improved:
            state.update(best=value, best_epoch=epoch + 1, bad_epochs=0)
        else:
            state["bad_epochs"] += 1
        state["history"].append(record)
        append_line(out / "log.jsonl", json.dumps(record))
        save_checkpoint(ckpt_dir, tagger, optimizer, state,
                        {**(average.state_tensors() if average else {}), **rank_rngs})
        log.info("epoch %d  loss %.3f  dev %s %.2f%s  %.1fs (%.0f sent/s)", epoch + 1, record["loss"], metric,
                 value, " *" if state["best_epoch"] == epoch + 1 else "", train_seconds, record["sentences_per_s"])
        state = ranks.broadcast(state)

    for feature in features:
        feature.remember_for_scoring(False)
    if not ranks.main:
        return None

    plot_curves(state["history"], out / "curves.png", metric)
    best = Tagger.load(out / "model", device)
    dev_scores = best.evaluate(corpus.dev, unseen="score").scores
    test = None
    if corpus.test:
        evaluation = best.evaluate(corpus.test, unseen="score")
        test = scores_dict(evaluation.scores)
        write_conll(corpus.test, evaluation.predictions, out / "test.predictions.txt")
    results = {"best_epoch": state["best_epoch"], "epochs_run": state["epoch"], "metric": metric,
               "dev": scores_dict(dev_scores), "test": test, "seed": cfg.seed,
               "train_sentences_per_s": round(statistics.fmean(speeds), 1) if speeds else None}
    atomic_write_json(out / "results.json", results)
    return TrainResult(out, state["best_epoch"], results["dev"], test, state["epoch"],
                       results["train_sentences_per_s"] or 0.0)


def _trim_log(path: Path, epochs: int) -> None:
    """Keep the log lines the checkpoint covers: a kill between the log append and the checkpoint save
    leaves one more line, for an epoch that the resumed run trains again."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    if len(lines) < epochs:
        raise SeqlabError(f"log.jsonl has {len(lines)} epochs but the checkpoint {epochs}: refusing to resume "
                          f"with an incomplete log", path=path)
    if len(lines) > epochs:
        log.warning("log.jsonl: dropping %d line(s) after epoch %d, which the checkpoint does not cover (the "
                    "epoch is trained again)", len(lines) - epochs, epochs)
        atomic_write_text(path, "".join(line + "\n" for line in lines[:epochs]))


def train_seeds(config: ExperimentConfig, out_dir: str | Path, seeds: list[int], data_root: str | None = None,
                resume: bool = False, progress: bool = True, nproc: int = 1) -> dict:
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
            summary[split] = {"values": values, "mean": statistics.fmean(values),
                              "std": statistics.stdev(values) if len(values) > 1 else 0.0, "max": max(values)}
    atomic_write_json(out / "summary.json", summary)
    return summary


def evaluate(model: Tagger | str | Path, data: str | Path, output: str | Path | None = None,
             batch_size: int | None = None, strict: bool = False, device: str = "cpu",
             beam: int | None = None, engine: str = "torch") -> Scores:
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
