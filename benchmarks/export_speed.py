"""Inference speed of exported models (ONNX on onnxruntime, TorchScript) against eager PyTorch, same process,
alternating.

    python benchmarks/export_speed.py MODEL DATA [--threads 2] [--reps 3]

Exports MODEL to temporary files, checks that each gives the eager model's tags on DATA (CoNLL columns, or BMES for
character models), then times predict_tags at batch 1 and 64, repetitions alternating, and prints the
medians in sentences/s. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def model_and_data(batch_sizes: bool = False):
    """(arguments MODEL DATA [--threads] [--reps] [--batch-sizes], the eager tagger, DATA's sentences), threads
    set; shared with engine_speed.py, which also takes ``--batch-sizes``."""
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("data")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    if batch_sizes:
        parser.add_argument("--batch-sizes", default="1,64", help="comma-separated batch sizes to time")
    args = parser.parse_args()
    import torch

    from seqlab.data.corpus import read_file
    from seqlab.tagger import Tagger

    torch.set_num_threads(args.threads)
    eager = Tagger.load(args.model)
    return args, eager, read_file(Path(args.data), eager.config.data, labeled=False)


def main() -> None:
    args, eager, sentences = model_and_data()
    from seqlab.export import OnnxTagger, TorchScriptTagger, export_onnx, export_torchscript

    with tempfile.TemporaryDirectory() as tmp:
        export_onnx(args.model, Path(tmp) / "m.onnx")
        export_torchscript(args.model, Path(tmp) / "m.pt")
        onnx = OnnxTagger(args.model, Path(tmp) / "m.onnx", threads=args.threads)
        script = TorchScriptTagger(args.model, Path(tmp) / "m.pt")
        expected = eager.predict_tags(sentences)
        same = {
            "onnxruntime": onnx.predict_tags(sentences) == expected,
            "torchscript": script.predict_tags(sentences) == expected,
        }
        engines = (
            ("eager", lambda b: eager.predict_tags(sentences, b)),
            ("onnxruntime", lambda b: onnx.predict_tags(sentences, b)),
            ("torchscript", lambda b: script.predict_tags(sentences, b)),
        )
        times: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.reps):
            for batch in (1, 64):
                for name, run in engines:
                    start = time.perf_counter()
                    run(batch)
                    times.setdefault((name, batch), []).append(len(sentences) / (time.perf_counter() - start))
    print(f"{args.model} on {args.data}: {len(sentences)} sentences, {args.threads} threads, identical tags: {same}")
    print("| engine | batch 1 (sent/s) | batch 64 (sent/s) |\n|---|---|---|")
    for name, _ in engines:
        print(f"| {name} | {statistics.median(times[(name, 1)]):.0f} | {statistics.median(times[(name, 64)]):.0f} |")


if __name__ == "__main__":
    main()
