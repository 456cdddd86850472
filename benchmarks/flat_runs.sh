#!/usr/bin/env bash
# FLAT (paper 002), issue 12: Resume runs with the same embeddings and epoch budget for FLAT, FLAT_msm, FLAT_mld,
# the lexicon-free Transformer and the character BiLSTM-CRF, then the memory and speed benchmarks; one worker,
# two torch threads. Session 2026-11-23 capped the runs at EPOCHS epochs (default 15) to fit a 2-core session:
# the paper trains 100 epochs.
# Usage: benchmarks/flat_runs.sh [OUT_ROOT] [EPOCHS]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/flat}
EPOCHS=${2:-15}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
: > "$Q"
run() {  # config name seed
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $1 --out $OUT/$2-seed$3 --set train.seed=$3" \
       "--set train.threads=2 --max-epochs $EPOCHS" >> "$Q"
}
run configs/ner-resume-flat.yaml resume-flat 1
run configs/flat/resume-bilstm-crf.yaml resume-bilstm-crf 1
run configs/ner-resume-transformer.yaml resume-transformer 1
run configs/flat/resume-msm.yaml resume-msm 1
run configs/flat/resume-mld.yaml resume-mld 1
run configs/ner-resume-flat.yaml resume-flat 2
run configs/ner-resume-flat.yaml resume-flat 3
echo ".venv/bin/python benchmarks/flat_bench.py memory --data-root ../shared/data > $OUT/memory.md" >> "$Q"
echo ".venv/bin/python benchmarks/flat_bench.py speed --data-root ../shared/data > $OUT/speed.md" >> "$Q"
exec benchmarks/queue.sh "$Q" 1
