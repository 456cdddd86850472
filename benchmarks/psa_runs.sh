#!/usr/bin/env bash
# The PSA benchmark runs of issue 3 (and the chunking tuning runs of issue 2), as run on 2026-11-21:
# two workers, one torch thread each. Epoch caps (to fit one 3-hour session on 2 cores): chunking PSA vs
# baseline 20, POS and NER 10, chunking ablations 8 (compared on dev F1 at equal epochs), tuning 30.
# (Session 3 ran the jobs left unfinished by session 2, and the chunking-bilstm-crf-large seeds.)
# Usage: benchmarks/psa_runs.sh [OUT_ROOT]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/bench2}
EPOCHS=${EPOCHS:-20}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
. benchmarks/lib.sh  # paper_or_default
: > "$Q"
job() {  # config, run name, seed, [epochs], [extra --set options]
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $1 --out $OUT/$2-seed$3 --set train.seed=$3" \
       "--set train.threads=1 --max-epochs ${4:-$EPOCHS} ${5:-}" >> "$Q"
}
job $(paper_or_default chunking-bilstm-crf) tune-chunking-nadam 1 30 \
    "--set train.optimizer=nadam --set train.lr=0.002 --set train.clip=1.0"
job $(paper_or_default chunking-bilstm-crf) tune-chunking-sgd-lr03 1 30 \
    "--set train.optimizer=sgd --set train.lr=0.03 --set train.clip=5.0"  # killed after epoch 17
# Seed 1 ran (session 2) as configs/psa/chunking-viii-no-fusion.yaml with --set train.optimizer=nadam
# --set train.lr=0.002 --set train.clip=1.0 (name tune-chunking-nadam-large): its resolved config.json is
# identical to this config's; the run directory was renamed chunking-bilstm-crf-large-seed1.
for seed in 1 2 3 4 5; do
  job configs/chunking-bilstm-crf-large.yaml chunking-bilstm-crf-large "$seed" 30
done
for seed in 1 2 3; do
  job $(paper_or_default chunking-psa) chunking-psa "$seed"
  job configs/psa/chunking-viii-no-fusion.yaml chunking-bilstm-crf-psa-setting "$seed"
done
job $(paper_or_default pos-psa) pos-psa 1 10
job configs/psa/pos-viii-no-fusion.yaml pos-bilstm-crf-psa-setting 1 10
job $(paper_or_default ner-conll2003-psa) ner-conll2003-psa 1 10
job configs/psa/ner-conll2003-viii-no-fusion.yaml ner-conll2003-bilstm-crf-psa-setting 1 10
for row in vii-no-mask vii-no-gaussian vii-no-position-bias viii-no-first-fusion viii-no-second-fusion; do
  job "configs/psa/chunking-$row.yaml" "chunking-$row" 1 8
done
exec benchmarks/queue.sh "$Q" 2
