#!/usr/bin/env bash
# GCDT (paper 004), issue 11: the accuracy runs of the issue's benchmark list, each to the config's own stopping
# rule (patience 10, at most 100 epochs; MAX_EPOCHS caps it): GCDT, DT without global context and the GRU
# baseline, 3 seeds on CoNLL-2000 chunking and 2 on CoNLL-2003 NER; then GCDT and the BiLSTM-CRF with the
# MiniLM contextual features, 2 seeds on NER. Every GCDT-family run trains as the authors' code does (Adam lr
# 8e-4, 1,024-token batches, rate held 1,000 steps, then halved every 3,000), as in the runs of BENCHMARKS.md;
# the configs' default is now the CPU recipe, so CODE_TRAINING sets every key of that training. train.device is auto: a GPU when there is one.
# Resumable: run it again after an interruption and each run continues from its last checkpoint; finished runs
# (results.json) are skipped. On one CPU thread a 20-epoch chunking run of GCDT takes about 50 minutes.
# NER_MAX_EPOCHS (default MAX_EPOCHS) caps every CoNLL-2003 run, so that all NER models share one budget.
# Order: every chunking seed, then seed 1 of each NER model (MiniLM ones included), then seed 2, so that an
# interrupted queue has one seed of every model before a second of any.
# Usage: benchmarks/gcdt_runs.sh [OUT_ROOT] [WORKERS] [THREADS] [MAX_EPOCHS] [NER_MAX_EPOCHS]
#        then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gcdt}
WORKERS=${2:-1}
THREADS=${3:-2}
MAX_EPOCHS=${4:-100}
NER_MAX_EPOCHS=${5:-$MAX_EPOCHS}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
: > "$Q"
CODE_TRAINING="--set train.lr_schedule=step_halving --set train.warmup_fraction=0 --set train.lr=0.0008 --set train.batch_size=32 --set train.batch_tokens=1024 --set train.lr_hold_steps=1000 --set train.lr_half_life_steps=3000 --set train.patience=10"
run() {  # config name seed [extra options]   (uses $EPOCHS)
  [ -f "$OUT/$2-seed$3/results.json" ] && return 0
  local resume=""
  [ -d "$OUT/$2-seed$3/checkpoint" ] && resume="--resume"
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $1 --out $OUT/$2-seed$3 --set train.seed=$3" \
       "--set train.threads=$THREADS --max-epochs $EPOCHS ${4:-} $resume" >> "$Q"
}
EPOCHS=$MAX_EPOCHS
for seed in 1 2 3; do
  run configs/gcdt/chunking-code-schedule.yaml chunking-code-schedule "$seed"  # GCDT, the code's training
  run configs/gcdt/chunking-no-global.yaml chunking-no-global-code "$seed" "$CODE_TRAINING"
  run configs/gcdt/chunking-gru-all.yaml chunking-gru-all-code "$seed" "$CODE_TRAINING"
done
EPOCHS=$NER_MAX_EPOCHS
for seed in 1 2; do
  run configs/gcdt/ner-conll2003-code-schedule.yaml ner-conll2003-code-schedule "$seed"
  run configs/ner-conll2003-bilstm-crf.yaml ner-conll2003-bilstm-crf "$seed"
  run configs/ner-conll2003-bilstm-crf-minilm.yaml ner-conll2003-bilstm-crf-minilm "$seed"
  run configs/ner-conll2003-gcdt-minilm.yaml ner-conll2003-gcdt-minilm-code "$seed" "$CODE_TRAINING"
  run configs/gcdt/ner-conll2003-no-global.yaml ner-conll2003-no-global-code "$seed" "$CODE_TRAINING"
  run configs/gcdt/ner-conll2003-gru-all.yaml ner-conll2003-gru-all-code "$seed" "$CODE_TRAINING"
done
exec benchmarks/queue.sh "$Q" "$WORKERS"
