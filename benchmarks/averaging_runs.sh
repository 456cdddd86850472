#!/usr/bin/env bash
# Session 4 (2026-11-21), issue 2: the chunking large model with weight averaging (train.ema_decay 0.999),
# seeds 1-5, 30 epochs, two workers with one torch thread each; same settings as the session-3 runs
# without averaging (benchmarks/psa_runs.sh), so the two sets of five differ only in the average.
# Usage: benchmarks/averaging_runs.sh [OUT_ROOT]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench4}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
: > "$Q"
for seed in 1 2 3 4 5; do
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train configs/chunking-bilstm-crf-large.yaml" \
       "--out $OUT/chunking-bilstm-crf-large-ema-seed$seed --set train.seed=$seed --set train.threads=1" \
       "--max-epochs 30 --set train.ema_decay=0.999" >> "$Q"
done
exec benchmarks/queue.sh "$Q" 2
