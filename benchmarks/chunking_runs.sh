#!/usr/bin/env bash
# Session 4 (2026-11-21), issue 2: chunking runs after the session-3 large model (benchmarks/psa_runs.sh),
# with the same settings (30 epochs, two workers with one torch thread each):
#   ema:  the large model with weight averaging (train.ema_decay 0.999); seeds 1-2 ran, 3-4 were
#         stopped at epoch 3 when seeds 1-2 showed no test gain (see BENCHMARKS.md);
#   deep: configs/chunking-bilstm-crf-deep.yaml (the large model with 2 BiLSTM layers), seeds 1-5.
# Usage: benchmarks/chunking_runs.sh [OUT_ROOT] [ema|deep]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench4}
WHICH=${2:-deep}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
: > "$Q"
job() {  # config, run name, seed, [extra options]
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $1 --out $OUT/$2-seed$3 --set train.seed=$3" \
       "--set train.threads=1 --max-epochs 30 ${4:-}" >> "$Q"
}
for seed in 1 2 3 4 5; do
  if [ "$WHICH" = ema ]; then
    job configs/chunking-bilstm-crf-large.yaml chunking-bilstm-crf-large-ema "$seed" "--set train.ema_decay=0.999"
  else
    job configs/chunking-bilstm-crf-deep.yaml chunking-bilstm-crf-deep "$seed"
  fi
done
exec benchmarks/queue.sh "$Q" 2
