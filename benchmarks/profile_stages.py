"""Where the time goes: per-stage wall time of batch-1 tagging (text in, labels out) and of training steps.

    python benchmarks/profile_stages.py configs/chunking-bilstm-crf.yaml --data-root ../shared/data \
        --model runs/speed/chunk-model/model --threads 2

Inference: each test sentence as a raw string through ``Tagger.predict`` (batch 1), timed per stage:
text -> Sentence, featurizers (text -> ids), collation (ids -> padded tensors), each embedder part,
each encoder layer, the decoder (Viterbi), labels and spans; "other" is the rest of the call (Python
glue between the stages). The same at batch 64 over the test set (``predict_tags``). Training: ``--train-batches`` steps
of ``train_step``, with the forward split the same way and backward + optimiser step timed apart. Stage timers add a few
microseconds per stage; the total is the untimed call's wall time, measured first. Run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections import defaultdict
from contextlib import contextmanager

import torch

from seqlab.config import load_config
from seqlab.data.batching import make_batches
from seqlab.data.corpus import load_corpus
from seqlab.tagger import Tagger
from seqlab.training import make_optimizer, seed_everything

CLOCK = time.perf_counter  # or time.thread_time (--clock cpu): CPU seconds, robust on a shared host


class Stages:
    """Accumulates time per stage name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @contextmanager
    def time(self, name: str):
        start = CLOCK()
        yield
        self.seconds[name] += CLOCK() - start

    def hook(self, module: torch.nn.Module, name: str) -> None:
        """Time every call of ``module`` under ``name``."""
        starts: list[float] = []
        module.register_forward_pre_hook(lambda *_: starts.append(CLOCK()))

        def done(*_):
            self.seconds[name] += CLOCK() - starts.pop()

        module.register_forward_hook(done)

    def wrap(self, obj, attr: str, name: str) -> None:
        """Time every call of the method ``obj.attr`` under ``name``."""
        inner = getattr(obj, attr)

        def timed(*args, **kwargs):
            with self.time(name):
                return inner(*args, **kwargs)

        setattr(obj, attr, timed)


def instrument(tagger: Tagger, stages: Stages) -> None:
    net = tagger.net
    for name in net.embedder.names:
        stages.hook(net.embedder._modules[name], f"embed: {name}")
    for i, layer in enumerate(net.encoders):
        stages.hook(layer, f"encoder {i}: {type(layer).__name__}")
    for attr in ("decode", "loss"):
        stages.wrap(net.decoder, attr, f"decoder.{attr}")
    stages.wrap(tagger, "_as_sentences", "text -> sentences")
    stages.wrap(tagger, "encode", "featurizers (text -> ids)")
    stages.wrap(tagger, "to_labels", "ids -> labels")
    import seqlab.tagger as tagger_module

    inner = tagger_module.make_batches

    def timed_batches(*args, **kwargs):
        with stages.time("collate (ids -> tensors)"):
            return inner(*args, **kwargs)

    tagger_module.make_batches = timed_batches


def report(title: str, stages: Stages, total: float, count: int, unit: str) -> dict:
    rows = {name: s for name, s in stages.seconds.items() if s > 0}
    timed = sum(s for name, s in rows.items() if not name.startswith("  "))
    out = {name: round(1e6 * s / count, 1) for name, s in sorted(rows.items(), key=lambda kv: -kv[1])}
    out["other (Python glue)"] = round(1e6 * max(total - timed, 0.0) / count, 1)
    out["total"] = round(1e6 * total / count, 1)
    print(f"\n{title}: microseconds per {unit}")
    for name, us in out.items():
        print(f"  {name:34s} {us:10.1f}  {100 * us / out['total']:5.1f}%")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--model", help="a trained model folder (else fresh weights)")
    p.add_argument("--data-root")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--sentences", type=int, default=1000, help="test sentences tagged one at a time")
    p.add_argument("--train-batches", type=int, default=200)
    p.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: this thread's CPU time (use with --threads 1 when the machine is shared)",
    )
    p.add_argument("--out")
    args = p.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    config = load_config(args.config)
    seed_everything(config.train.seed)
    corpus = load_corpus(config.data, args.data_root)
    texts = [" ".join(s.tokens) for s in (corpus.test or corpus.dev)[: args.sentences]]
    result = {}

    tagger = (
        Tagger.load(args.model)
        if args.model
        else Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    )
    for t in texts[:100]:
        tagger.predict([t], batch_size=1)  # warm-up
    start = CLOCK()
    for t in texts:
        tagger.predict([t], batch_size=1)
    total = CLOCK() - start
    stages = Stages()
    instrument(tagger, stages)
    for t in texts:
        tagger.predict([t], batch_size=1)
    result["predict_batch_1"] = report("tagging one raw sentence at a time", stages, total, len(texts), "sentence")

    tagger = Tagger.load(args.model) if args.model else tagger
    test = corpus.test or corpus.dev
    tagger.predict_tags(test, 64)  # warm-up
    start = CLOCK()
    tagger.predict_tags(test, 64)
    total = CLOCK() - start
    stages = Stages()
    instrument(tagger, stages)
    tagger.predict_tags(test, 64)
    result["predict_tags_batch_64"] = report(
        "tagging the test set at batch 64 (Sentence in, labels out)", stages, total, len(test), "sentence"
    )

    tagger = Tagger.build(config, corpus.train, corpus.scheme, corpus.dev + corpus.test)
    net, cfg = tagger.net, config.train
    params = [q for q in net.parameters() if q.requires_grad]
    optimizer = make_optimizer(params, cfg)
    batches = make_batches(
        tagger.encode(corpus.train, with_tags=True),
        tagger.featurizers,
        cfg.batch_size,
        cfg.batch_tokens,
        shuffle=True,
        rng=random.Random(1),
        length=cfg.batch_length,
    )
    batches = batches[: args.train_batches]
    net.train()
    stages = Stages()
    instrument(tagger, stages)

    def step(batch) -> None:
        optimizer.zero_grad(set_to_none=True)
        with stages.time("forward + loss"):
            loss = net.loss(batch).sum() / len(batch.index)
        with stages.time("backward"):
            loss.backward()
        with stages.time("clip + optimiser step"):
            if cfg.clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.clip)
            optimizer.step()

    for batch in batches[:20]:
        step(batch)
    stages.seconds.clear()
    start = CLOCK()
    for batch in batches:
        step(batch)
    total = CLOCK() - start
    forward = {k: v for k, v in stages.seconds.items() if k.startswith(("embed", "encoder", "decoder"))}
    for k in forward:  # parts of "forward + loss": indented, not added twice
        stages.seconds["  " + k] = stages.seconds.pop(k)
    result["train_step"] = report(
        f"training (batch {cfg.batch_size}, {cfg.optimizer})", stages, total, len(batches), "step"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
