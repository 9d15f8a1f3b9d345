#!/usr/bin/env bash
# existing_paths.sh: what a change to the futures, the tasks or the workers costs the paths
# that were there before it, as interleaved pairs of spool-bench runs (spool only).
#
#   bench/ab/existing_paths.sh REV_A REV_B [RUNS] > LOG
#
# REV_A and REV_B as for ab.sh (a commit, or dir:BUILD for a tree built already). Pairs of:
#   - empty --n 1000000: fire-and-forget posts, one bulk call, futures kept;
#   - fib 30 (a task per call down to cutoff 16, each waiting inside its task), --repeat 9;
#   - coro: the same fib as coroutines, as futures and with parallel_invoke, --repeat 9;
#   - latency --tasks 20000: own wait, flag hand-off, future run by a worker (p50).
# The others run --repeat 1; fib and coro take about a millisecond, so one repeat of them is
# mostly the machine's jitter. On a shared 2-core host single pairs swing 5-20% either way:
# RUNS of 30 or more tell a few percent apart.
# Each block ends with bench/ab/summary.py's min/median/max per revision and the ratio of the
# medians (REV_B over REV_A).
set -euo pipefail
a=$1
b=$2
runs=${3:-5}
here=$(dirname "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

csv_of() {  # a command that runs one spool-bench experiment and prints its CSV rows
  printf '%s\n' 'out=$(mktemp --suffix=.csv); $AB_BUILD/bench/spool-bench "$@" --out "$out" >/dev/null 2>&1; tail -n +2 "$out"; rm -f "$out"'
}
block() {  # block TITLE REPEAT EXPERIMENT_ARGS... -- MATCH...: a summary per MATCH
  local title=$1 repeat=$2 args=() matches=()
  shift 2
  while [[ $1 != -- ]]; do args+=("$1"); shift; done
  shift
  matches=("$@")
  echo "## $title"
  "$here/ab.sh" -n "$runs" "$a" "$b" -- bash -c "$(csv_of)" _ "${args[@]}" --threads 2 \
    --repeat "$repeat" --peers spool | tee "$log"
  for m in "${matches[@]}"; do
    echo "# $m (median column)"
    "$here/summary.py" "$log" 8 "$m"
  done
}

block "empty, tasks/s" 1 empty --n 1000000 -- "fire-and-forget" "bulk" "futures"
block "fib(30), ms" 9 fib --n 30 -- ",spool,"
block "coro, ms" 9 coro --n 30 -- ",spool coroutines," ",spool futures," ",spool,"
block "latency, p50 us" 1 latency --tasks 20000 -- "own wait" "flag hand-off" \
  "future run by a worker"
