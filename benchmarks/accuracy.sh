#!/usr/bin/env bash
# Accuracy benchmarks of the BiLSTM-CRF baseline on the shared corpora (issue 2).
# Usage: [THREADS=1] benchmarks/accuracy.sh [OUT_ROOT] [SEED]   (one torch thread: robust when the 2 cores are shared)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench}
SEED=${2:-1}
export SEQLAB_DATA=${SEQLAB_DATA:-../shared/data}
for task in chunking-bilstm-crf pos-bilstm-crf ner-conll2003-bilstm-crf; do
  start=$(date +%s)
  .venv/bin/seqlab -q train "configs/$task.yaml" --out "$OUT/$task-seed$SEED" --set train.seed="$SEED" --set train.threads="${THREADS:-1}"
  echo "$task seed $SEED wall_s $(( $(date +%s) - start ))" | tee -a "$OUT/wall.txt"
done
