#!/usr/bin/env bash
# own_wait_modes.sh: the own-wait round trip of two revisions, counted by mode.
#
#   bench/ab/own_wait_modes.sh REV_A REV_B [RUNS] [THRESHOLD_US] > LOG
#
# REV_A and REV_B as for ab.sh (a commit, or dir:BUILD). Runs `spool-bench latency --tasks
# 20000 --threads 2 --repeat 1 --peers spool` RUNS times (default 30) per revision,
# interleaved, and summarises the own-wait p50 (spool's submit().get() from an outside thread)
# and the process's cores during it.
#
# Why modes: on a 2-core host that path has two steady states, set by the first trips of a
# fresh pool. Either the workers fall asleep and the waiter takes each task back itself (about
# 0.15-0.2 us, about one core busy), or a worker stays awake, polling, and catches each task
# first (about 0.35-0.5 us, both cores busy). Which state a run settles in is a race, so a
# median over a few runs mostly tells how many landed in each; this prints that count
# (summary.py --above THRESHOLD_US, default 0.25) beside the medians.
set -euo pipefail
a=$1
b=$2
runs=${3:-30}
threshold=${4:-0.25}
here=$(dirname "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

csv='out=$(mktemp --suffix=.csv); $AB_BUILD/bench/spool-bench "$@" --out "$out" >/dev/null 2>&1; grep "own wait" "$out"; rm -f "$out"'
"$here/ab.sh" -n "$runs" "$a" "$b" -- bash -c "$csv" _ latency --tasks 20000 --threads 2 \
  --repeat 1 --peers spool | tee "$log"
echo "# own wait p50, us"
"$here/summary.py" "$log" 8 "own wait" --above "$threshold"
echo "# process cores during the own-wait trips"
"$here/summary.py" "$log" cpu_cores
