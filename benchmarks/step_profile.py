"""Where a training step and batch-1 tagging spend their time, on CPU or a GPU: PyTorch's profiler over
``--steps`` training steps (after ``--warmup`` unprofiled ones) and over ``--sentences`` test sentences tagged one
at a time. Prints the operators by self CPU time (and by GPU time on a GPU), and per step or sentence the kernel
launches, copies between host and GPU and synchronisations the runtime saw: what to remove when a GPU step takes
far longer than its arithmetic (BENCHMARKS.md, "GPU").

    python benchmarks/step_profile.py configs/chunking-bilstm-crf.yaml --data-root ../shared/data --device cuda \
        --set model.embedder.features.word.pretrained=null --out runs/step-profile.txt
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile
from training_setup import training_setup

from seqlab.devices import resolve_device
from seqlab.training import train_step

#: Runtime calls counted per step: launches, copies and waits between host and GPU.
RUNTIME_CALLS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cudaMemcpyAsync",
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("--data-root")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--sentences", type=int, default=100)
    p.add_argument("--rows", type=int, default=25, help="operators listed per table")
    p.add_argument("--set", action="append", default=[])
    p.add_argument("--out")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    setup = training_setup(args.config, args.set, args.data_root, device, batches=args.warmup + args.steps)
    config, corpus, tagger, batches = setup.config, setup.corpus, setup.tagger, setup.batches
    params, optimizer = setup.params, setup.optimizer
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    lines = [
        f"{args.config} on {torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, "
        f"torch {torch.__version__}, {args.threads} threads"
    ]

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def steps(chosen) -> None:
        for batch in chosen:
            train_step(tagger.net, batch.to(device), optimizer, params, config.train)
        sync()

    tagger.net.train()
    steps(batches[: args.warmup])
    start = time.perf_counter()
    steps(batches[args.warmup :])
    per_step = (time.perf_counter() - start) / max(1, args.steps)
    with profile(activities=activities) as prof:
        steps(batches[args.warmup :])
    lines += report(
        prof,
        f"training: {args.steps} steps of batch {config.train.batch_size}, {per_step * 1e3:.2f} ms a step unprofiled",
        args.steps,
        device,
        args.rows,
    )

    tagger.net.eval()
    test = (corpus.test or corpus.dev)[: args.sentences]
    tagger.predict_tags(test, 1)  # warm-up
    start = time.perf_counter()
    tagger.predict_tags(test, 1)
    per_sentence = (time.perf_counter() - start) / len(test)
    with profile(activities=activities) as prof:
        tagger.predict_tags(test, 1)
    lines += report(
        prof,
        f"tagging: {len(test)} sentences at batch 1, {per_sentence * 1e3:.2f} ms a sentence unprofiled",
        len(test),
        device,
        args.rows,
    )
    text = "\n".join(lines)
    print(text)
    if args.out:
        from pathlib import Path

        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text + "\n")


def report(prof, title: str, units: int, device: torch.device, rows: int) -> list[str]:
    events = prof.key_averages()
    counts = {e.key: e.count for e in events}
    out = ["", f"== {title}", events.table(sort_by="self_cpu_time_total", row_limit=rows)]
    if device.type == "cuda":
        out.insert(2, "per unit: " + ", ".join(f"{name} {counts.get(name, 0) / units:.1f}" for name in RUNTIME_CALLS))
        out.append(events.table(sort_by="self_device_time_total", row_limit=rows))
    return out


if __name__ == "__main__":
    main()
