"""How much of this machine's arithmetic the BiLSTM-CRF uses: measured fp32 matmul peak against the
model's FLOPs per token times the measured tokens/s.

    python benchmarks/peak_fraction.py benchmarks/results/speed-compare-nadam.json --threads 2

The peak is the best of 5 products of two 2048 x 2048 fp32 matrices (2 * 2048^3 FLOPs each) at
``--threads``. The FLOP count is for the NCRF++-size chunking model (configs/chunking-bilstm-crf.yaml),
multiply-adds counted as 2 FLOPs, from its shapes: the char CNN over each token's characters (the
mean characters per token, as if every token ran it: a batch runs each distinct token once but pads words
to its longest), both LSTM directions (input and recurrent products), the tag projection and the CRF's tag-pair scores.
Training counts the usual 3x forward (forward, and two products per weight in backward). Element-wise
work (gates' nonlinearities, softmax, optimiser) is left out: the fraction is of matmul arithmetic.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

CHARS_PER_TOKEN = 4.5  # CoNLL-2000 train 4.46, test 4.53: mean characters per token (cut at 30)


def matmul_peak(threads: int, n: int = 2048) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b  # warm-up
    best = 0.0
    for _ in range(5):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - start))
    return best / 1e9


def flops_per_token(
    words: int = 50,
    chars: int = 30,
    char_filters: int = 50,
    casing: int = 8,
    hidden: int = 200,
    tags: int = 40,
    kernel: int = 3,
) -> dict[str, float]:
    per_dir = hidden // 2
    inp = words + char_filters + casing
    out = {
        "char CNN": 2 * CHARS_PER_TOKEN * (kernel * chars) * char_filters,  # one window per character
        "BiLSTM": 2 * 2 * 4 * per_dir * (inp + per_dir),
        "tag projection": 2 * hidden * tags,
        "CRF tag pairs": 2 * tags * tags,
    }
    out["forward total"] = sum(out.values())
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("speed", help="a speed_compare.py or speed.py result (JSON)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tokens-per-sentence", type=float, default=23.7, help="CoNLL-2000 train mean")
    p.add_argument("--test-tokens-per-sentence", type=float, default=23.55, help="CoNLL-2000 test mean")
    args = p.parse_args()
    with open(args.speed) as f:
        result = json.loads(f.read())
    if "median" in result:  # speed_compare.py: the new checkout's medians
        speeds = {k: v["new"] for k, v in result["median"].items()}
    else:
        speeds = {
            "train": result["train"]["sentences_per_s"],
            **{f"inference {k}": v["sentences_per_s"] for k, v in result["inference"].items()},
        }
    peak = matmul_peak(args.threads)
    flops = flops_per_token()
    fwd = flops["forward total"]
    report = {
        "matmul_peak_gflops": round(peak, 1),
        "threads": args.threads,
        "flops_per_token": {k: round(v) for k, v in flops.items()},
        "fraction_of_peak": {},
    }
    for key, sents in speeds.items():
        per_token = 3 * fwd if key == "train" else fwd
        tokens = sents * (args.tokens_per_sentence if key == "train" else args.test_tokens_per_sentence)
        gflops = tokens * per_token / 1e9
        report["fraction_of_peak"][key] = {
            "sentences_per_s": sents,
            "gflops": round(gflops, 2),
            "fraction": round(gflops / peak, 4),
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
