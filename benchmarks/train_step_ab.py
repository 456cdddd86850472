"""Two versions of a training step alternated in one process: the lever off (A) and on (B).

    python benchmarks/train_step_ab.py
        --lever nadam|crf-numpy|crf-scaled|crf-compiled|step-wrappers|fused-sgd|fused-nadam|dropout|flat-lengths|
                gc-freeze|bilstm-pair|psa-tanh|char-packed
        [--optimizer nadam|sgd] [--config configs/chunking-bilstm-crf.yaml] [--data-root ../shared/data]
        [--threads 2] [--reps 5] [--steps 130]

Levers: ``nadam``: torch.optim.NAdam (A) against seqlab.optim.NAdam (B); ``crf-numpy``: the CRF's log
partition and gradient as PyTorch operations (A) against NumPy float64 (B, seqlab.crf_partition.CPU_NUMPY);
``crf-scaled``: the NumPy recursions in log space (A) against probability space (B, seqlab.crf_partition.CPU_SCALED;
other roundings); ``crf-compiled``: the probability-space recursions as NumPy calls (A) against compiled by
Numba (B, seqlab.crf_partition.CPU_COMPILED; other roundings); ``step-wrappers``: ``zero_grad`` and the optimiser's
step through PyTorch's profiler-label wrapper (A) against ``seqlab.training.clear_grads`` and the step unwrapped where
no hook or profiler needs it (B; the same bits); ``fused-sgd`` (use ``--optimizer sgd``):
``torch.optim.SGD(foreach=True)`` after ``clip_grad_norm_`` (A) against the fused SGD taking the clipping factor (B,
seqlab.training.FUSED_SGD; other roundings); ``fused-nadam``: seqlab's NAdam as its multi-tensor step after
``clip_grad_norm_`` (A) against two fused Adam calls taking the clipping factor (B, seqlab.optim.FUSED_NADAM; other
roundings); ``dropout``: ``torch.nn.Dropout`` (A) against ``seqlab.dropout.Dropout`` (B; other masks from the same seed,
so the weights differ after the first step); ``flat-lengths``: FLAT's R for pairs with words by four lookups
(A) against one lookup in the table of sums per span lengths (B; use a FLAT ``--config``); ``gc-freeze``: the
whole heap seen by the garbage collector (A) against frozen after loading (B, ``gc.freeze()``, as
:func:`seqlab.heap.freeze_loaded` does; the same model twice, so the weights stay the same bits);
``bilstm-pair``: a one-layer BiLSTM's batches without padding through two one-way kernel calls (A) against one
bidirectional call on the same parameters (B; other roundings, so the weights drift apart over the steps);
``psa-tanh`` (with a PSA ``--config``): PSA's additive scores with ``torch.tanh_`` (A, ``psa_reference.py``) against
the sigmoid identity (B); ``char-packed``: the char CNN's windows over each batch's padded char matrix (A) against
the words packed end to end (B, ``CharCNN._packed``; other roundings); ``row-tables`` (use ``--optimizer sgd``): the
word table updated whole every step (A) against by rows (B, :mod:`seqlab.rows`; other roundings).
A and B are built once (seed 1 each, each with its own random stream for dropout) and take 20 warm-up
steps; each repetition then runs the next ``--steps`` batches through both, in blocks of 10 steps in the order
ABBA..., so that this host's drift falls on both alike. Prints ms per step, the largest weight difference
between A and B after the first repetition (0.0: the same bits) and the ratio of medians. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time

import torch
from psa_reference import TanhAdditiveScores
from torch import nn

import seqlab.crf.partition as partition
from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.dropout import Dropout
from seqlab.encoders import flat as flat_module
from seqlab.encoders import psa as psa_module
from seqlab.features.chars import CharCNN
from seqlab.lstm import BiLSTM
from seqlab.nn import rows
from seqlab.optim import NAdam
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, optim, seed_everything, train_step
from seqlab.training import step as training

UNLABELLED = optim._hooks_or_profiler


BLOCK = 10  # training steps per interleaved block
LENGTH_TABLE = flat_module.LENGTH_TABLE_ELEMENTS
FUSED = BiLSTM._fused
PACKED = CharCNN._packed


def padded_char_cnn(self, chars):
    """CharCNN._packed replaced by the padded form, as it ran before (the module's eval-mode branch, with
    gradients; the char CNN has no dropout, so its mode changes nothing else)."""
    self.training = False
    try:
        return CharCNN.forward(self, chars)
    finally:
        self.training = True


SCORES = psa_module.AdditiveScores


def per_direction_with_gradients(self, x, lengths):
    """BiLSTM._fused as it was before the bidirectional training call: None whenever gradients are on."""
    return None if self.training or torch.is_grad_enabled() else FUSED(self, x, lengths)


CLEAR_GRADS = training.clear_grads


def zero_grad(optimizer):
    """What train_step called before seqlab.training.clear_grads."""
    optimizer.zero_grad(set_to_none=True)


def set_lever(lever: str, on: bool) -> None:
    """The module-level switches of the levers that have one (the others differ in what is built)."""
    partition.CPU_NUMPY = on if lever == "crf-numpy" else True
    partition.CPU_SCALED = on if lever == "crf-scaled" else True
    partition.CPU_COMPILED = on if lever == "crf-compiled" else True
    training.clear_grads = CLEAR_GRADS if on or lever != "step-wrappers" else zero_grad
    optim._hooks_or_profiler = UNLABELLED if on or lever != "step-wrappers" else (lambda opt: True)
    training.FUSED_SGD = on if lever == "fused-sgd" else True
    optim.FUSED_NADAM = on if lever == "fused-nadam" else True
    flat_module.LENGTH_TABLE_ELEMENTS = 0 if lever == "flat-lengths" and not on else LENGTH_TABLE
    BiLSTM._fused = per_direction_with_gradients if lever == "bilstm-pair" and not on else FUSED
    psa_module.AdditiveScores = TanhAdditiveScores if lever == "psa-tanh" and not on else SCORES
    CharCNN._packed = padded_char_cnn if lever == "char-packed" and not on else PACKED
    if lever == "gc-freeze":
        (gc.freeze if on else gc.unfreeze)()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument(
        "--lever",
        choices=[
            "nadam",
            "crf-numpy",
            "crf-scaled",
            "crf-compiled",
            "step-wrappers",
            "fused-sgd",
            "fused-nadam",
            "dropout",
            "flat-lengths",
            "gc-freeze",
            "bilstm-pair",
            "psa-tanh",
            "char-packed",
            "row-tables",
        ],
        required=True,
    )
    p.add_argument("--optimizer", choices=["nadam", "sgd"], default="nadam")
    p.add_argument("--config", default="configs/chunking-bilstm-crf.yaml")
    p.add_argument("--data-root", default="../shared/data")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=130)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    over = ["train.optimizer=sgd", "train.lr=0.015", "train.clip=5.0"] if args.optimizer == "sgd" else []
    config = load_config(args.config, over)
    corpus = load_corpus(config.data, args.data_root)
    cfg = config.train
    batches = None
    models, rng = {}, {}
    for version in ("A", "B"):
        on = version == "B"
        set_lever(args.lever, on)
        seed_everything(1)
        tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
        params = [q for q in tagger.net.parameters() if q.requires_grad]
        if args.lever == "dropout":
            for m in tagger.net.modules():
                if isinstance(m, nn.Dropout):
                    m.__class__ = Dropout if on else nn.Dropout
        if args.lever == "nadam" and not on:
            opt = torch.optim.NAdam(params, lr=cfg.lr, eps=cfg.adam_eps, foreach=True)
        elif args.lever == "nadam":
            opt = NAdam(params, lr=cfg.lr, eps=cfg.adam_eps)
        else:
            opt = make_optimizer(params, cfg, row_tables=on or args.lever != "row-tables")
        if batches is None:
            batches = make_batches(
                tagger.encode(corpus.train, with_tags=True),
                tagger.featurizers,
                cfg.batch_size,
                cfg.batch_tokens,
                shuffle=True,
                rng=random.Random(1),
                length=cfg.batch_length,
            )[: 20 + args.steps]
        tagger.net.train()
        for b in batches[:20]:  # warm-up
            train_step(tagger.net, b, opt, params, cfg)
        models[version] = (tagger.net, opt, params)
        rng[version] = torch.get_rng_state()
    times, weights = {"A": [], "B": []}, {}
    for rep in range(args.reps):
        seconds = {"A": 0.0, "B": 0.0}
        for k, lo in enumerate(range(20, 20 + args.steps, BLOCK)):
            for version in ("A", "B") if k % 2 == 0 else ("B", "A"):  # ABBA: drift falls on both alike
                set_lever(args.lever, version == "B")
                net, opt, params = models[version]
                torch.set_rng_state(rng[version])
                start = time.perf_counter()
                for b in batches[lo : min(lo + BLOCK, 20 + args.steps)]:
                    train_step(net, b, opt, params, cfg)
                seconds[version] += time.perf_counter() - start
                rng[version] = torch.get_rng_state()
        for version, sec in seconds.items():
            times[version].append(round(sec / args.steps * 1000, 2))
        if rep == 0:
            for m in models.values():
                for q in m[2]:
                    rows.flush(q)  # a row table's pending updates (seqlab.rows)
            weights = {v: [q.detach().clone() for q in m[2]] for v, m in models.items()}
    set_lever(args.lever, True)
    print(f"lever {args.lever}, optimizer {cfg.optimizer}; ms per step, A (off): {times['A']}, B (on): {times['B']}")
    print(
        "largest weight difference after the first repetition:",
        max((a - b).abs().max().item() for a, b in zip(weights["A"], weights["B"])),
    )
    print("ratio of medians A / B", round(statistics.median(times["A"]) / statistics.median(times["B"]), 3))


if __name__ == "__main__":
    main()
