#!/usr/bin/env bash
# Accuracy of the BiLSTM-CRF baseline on the shared corpora (issue 2): the shipped NCRF++-size configs at the epoch
# caps of the published runs (BENCHMARKS.md, "Accuracy"): chunking 30 (Nadam), POS 20 and NER 30 (SGD). One torch
# thread per run (robust when the 2 cores are shared); the larger chunkers: benchmarks/chunking_runs.sh.
# Usage: [THREADS=1] benchmarks/accuracy.sh [OUT_ROOT] [SEED]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench}
SEED=${2:-1}
export SEQLAB_DATA=${SEQLAB_DATA:-../shared/data}
for job in chunking-bilstm-crf:30 pos-bilstm-crf:20 ner-conll2003-bilstm-crf:30; do
  task=${job%%:*} epochs=${job##*:}
  start=$(date +%s)
  .venv/bin/seqlab -q train "configs/$task.yaml" --out "$OUT/$task-seed$SEED" --set train.seed="$SEED" \
    --set train.threads="${THREADS:-1}" --max-epochs "$epochs"
  echo "$task seed $SEED wall_s $(( $(date +%s) - start ))" | tee -a "$OUT/wall.txt"
done
