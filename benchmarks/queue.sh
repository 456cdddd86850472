#!/usr/bin/env bash
# A tiny job queue for long benchmark runs: N workers take lines from QUEUE_FILE (one shell command per
# line) until it is empty. Lines can be appended while the workers run.
# Usage: benchmarks/queue.sh QUEUE_FILE [WORKERS]   (run it in the background; logs go to QUEUE_FILE.log)
set -uo pipefail
QUEUE=$1
WORKERS=${2:-2}
LOG="$QUEUE.log"

next_job() {  # pop the first line of the queue under a lock
  exec 9>"$QUEUE.lock"
  flock 9
  local line
  line=$(head -n 1 "$QUEUE")
  if [ -n "$line" ]; then tail -n +2 "$QUEUE" > "$QUEUE.tmp" && mv "$QUEUE.tmp" "$QUEUE"; fi
  flock -u 9
  printf '%s' "$line"
}

worker() {
  while true; do
    job=$(next_job)
    [ -z "$job" ] && break
    start=$(date +%s)
    echo "$(date -Is) worker $1 start: $job" >> "$LOG"
    bash -c "$job" >> "$LOG.worker$1" 2>&1
    rc=$?  # before any command substitution below resets $?
    echo "$(date -Is) worker $1 done rc=$rc after $(( $(date +%s) - start )) s: $job" >> "$LOG"
  done
}

for w in $(seq 1 "$WORKERS"); do worker "$w" & done
wait
