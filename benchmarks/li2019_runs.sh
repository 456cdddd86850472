#!/usr/bin/env bash
# Paper 003 (Li et al. 2019), issue 10: Bi-LSTM-CNN (per-direction), + ATT, cross-Bi-LSTM-CNN on CoNLL-2000
# chunking and CoNLL-2003 NER, seeds 1-3, two workers with one torch thread each. Session 2026-11-23 capped
# the runs at EPOCHS epochs (default 8) to fit the session: the paper trains to early stopping (patience 20).
# Usage: benchmarks/li2019_runs.sh [OUT_ROOT] [EPOCHS]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/li2019}
EPOCHS=${2:-8}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
. benchmarks/lib.sh  # paper_or_default
: > "$Q"
for seed in 1 2 3; do
  for corpus in ner-conll2003 chunking; do
    for model in bilstm-cnn att-bilstm-cnn cross-bilstm-cnn; do
      echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $(paper_or_default $corpus-$model)" \
           "--out $OUT/$corpus-$model-seed$seed --set train.seed=$seed --set train.threads=1" \
           "--max-epochs $EPOCHS" >> "$Q"
    done
  done
done
exec benchmarks/queue.sh "$Q" 2
