#!/usr/bin/env bash
# GCDT (paper 004), issue 11: the accuracy runs of the issue's benchmark list, each to the config's own stopping
# rule (patience 10, at most 100 epochs): GCDT, DT without global context and the GRU baseline, 3 seeds on
# CoNLL-2000 chunking and 2 on CoNLL-2003 NER, and GCDT trained as the authors' train.sh (lr 8e-4) once; then
# GCDT and the BiLSTM-CRF with the MiniLM contextual features, 2 seeds on NER. train.device is auto: a GPU when
# there is one. Resumable: run it again after an interruption and each run continues from its last checkpoint;
# finished runs (results.json) are skipped.
# On 2 CPU threads one chunking epoch of GCDT takes about 2 minutes (65 sentences/s, 2026-11-24).
# Usage: benchmarks/gcdt_runs.sh [OUT_ROOT] [WORKERS] [THREADS]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-runs/gcdt}
WORKERS=${2:-1}
THREADS=${3:-2}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
: > "$Q"
run() {  # config name seed
  [ -f "$OUT/$2-seed$3/results.json" ] && return 0
  local resume=""
  [ -d "$OUT/$2-seed$3/checkpoint" ] && resume="--resume"
  echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $1 --out $OUT/$2-seed$3 --set train.seed=$3" \
       "--set train.threads=$THREADS $resume" >> "$Q"
}
for seed in 1 2 3; do
  run configs/chunking-gcdt.yaml chunking-gcdt "$seed"
  [ "$seed" = 1 ] && run configs/gcdt/chunking-code-schedule.yaml chunking-code-schedule 1  # the code's lr 8e-4
  run configs/gcdt/chunking-no-global.yaml chunking-no-global "$seed"
  run configs/gcdt/chunking-gru-all.yaml chunking-gru-all "$seed"
done
for seed in 1 2; do
  run configs/ner-conll2003-gcdt.yaml ner-conll2003-gcdt "$seed"
  run configs/gcdt/ner-conll2003-no-global.yaml ner-conll2003-no-global "$seed"
  run configs/gcdt/ner-conll2003-gru-all.yaml ner-conll2003-gru-all "$seed"
done
for seed in 1 2; do
  run configs/ner-conll2003-gcdt-minilm.yaml ner-conll2003-gcdt-minilm "$seed"
  run configs/ner-conll2003-bilstm-crf-minilm.yaml ner-conll2003-bilstm-crf-minilm "$seed"
  run configs/ner-conll2003-bilstm-crf.yaml ner-conll2003-bilstm-crf "$seed"
done
exec benchmarks/queue.sh "$Q" "$WORKERS"
