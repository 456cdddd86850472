#!/usr/bin/env bash
# Paper 003 (Li et al. 2019), issue 10, full length: continues each 8-epoch run of benchmarks/li2019_runs.sh
# (copied from SRC_ROOT, left untouched there) to the configs' own stopping rule (patience 20, at most 200
# epochs) with --resume. Nadam's learning rate does not depend on the epoch budget, so a continued run trains
# exactly as one started without the cap. Runs are resumable: run this script again after an interruption
# (a session's end) and each run continues from its last checkpoint; finished runs are skipped.
# Usage: benchmarks/li2019_full.sh [SRC_ROOT] [OUT_ROOT] [WORKERS]   then: python benchmarks/summarize.py OUT_ROOT
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=${1:-runs/li2019}
OUT=${2:-runs/li2019-full}
WORKERS=${3:-1}
mkdir -p "$OUT"
Q="$OUT/queue.txt"
. benchmarks/lib.sh  # paper_or_default
: > "$Q"
for seed in 1 2 3; do
  for corpus in chunking ner-conll2003; do
    for model in cross-bilstm-cnn bilstm-cnn att-bilstm-cnn; do
      name=$corpus-$model-seed$seed
      [ -f "$OUT/$name/results.json" ] && [ -f "$OUT/$name/.full" ] && continue
      if [ ! -d "$OUT/$name" ]; then
        if [ -d "$SRC/$name/checkpoint" ]; then cp -r "$SRC/$name" "$OUT/$name"; rm -f "$OUT/$name/results.json"; fi
      fi
      resume=""; [ -d "$OUT/$name/checkpoint" ] && resume="--resume"
      echo "SEQLAB_DATA=../shared/data .venv/bin/seqlab -q train $(paper_or_default $corpus-$model) --out $OUT/$name" \
           "--set train.seed=$seed --set train.threads=1 $resume && touch $OUT/$name/.full" >> "$Q"
    done
  done
done
exec benchmarks/queue.sh "$Q" "$WORKERS"
