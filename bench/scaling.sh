#!/bin/sh
# The scaling set: the pool experiments at several pool sizes against every peer, one
# JSON file per experiment and one log holding the tables. Meant for a host with at least
# as many cores as the largest size (16 by default).
#
#   bench/scaling.sh [SPOOL_BENCH [OUT_DIR]]
#   THREADS=2,4,8,16 LIMIT=150 bench/scaling.sh build/release/bench/spool-bench scaling
#   ONLY="empty pc" bench/scaling.sh ...     # a subset, by the names below
#
# Each experiment runs under `timeout LIMIT` seconds, so that one slow point cannot take
# the others' time; a killed experiment leaves no JSON, and its partial table stays in
# the log.
set -u
B=${1:-build/release/bench/spool-bench}
OUT=${2:-scaling}
T=${THREADS:-2,4,8,16}
LIMIT=${LIMIT:-150}
mkdir -p "$OUT"
LOG=$OUT/scaling.log

{
  date -u '+%Y-%m-%d %H:%M UTC'
  grep -m1 'model name' /proc/cpuinfo
  echo "cores: $(nproc)   threads: $T"
} | tee "$LOG"

run() {
  name=$1
  shift
  case " ${ONLY:-$name} " in *" $name "*) ;; *) return ;; esac
  echo "== $name: $B $* --threads $T" | tee -a "$LOG"
  timeout "$LIMIT" "$B" "$@" --threads "$T" --out "$OUT/$name.json" >>"$LOG" 2>&1
  echo "== $name: exit $?" | tee -a "$LOG"
}

run empty empty --n 200000 --repeat 3
run latency latency --tasks 20000 --repeat 3
run fib fib --repeat 5
run unbalanced unbalanced --repeat 3
run coro coro --repeat 3
run quicksort quicksort --quick --repeat 3
run pc pc --find-max --quick
