#!/usr/bin/env bash
# submit_and_handoff.sh: an A/B of the submission path and the hand-offs between two trees
# (docs/decisions.md, "Two full fences on every submission").
#
#   bench/ab/submit_and_handoff.sh REV_A REV_B [RUNS] > LOG
#
# REV_A and REV_B as for ab.sh (a commit, or dir:BUILD for a tree built already; both must
# contain the latency experiment's three variants). Interleaved pairs of:
#   - spool-post-burst 2 5000000 1: the rate, and the submitter's CPU per post (4/0);
#   - spool-bench latency, spool only: own wait, flag hand-off, future run by a worker;
#   - spool-bench timers --tasks 1000 (100 timers/s), spool only: CPU and lateness.
# Then bench/ab/summary.py on each section (see the comments at the end).
set -euo pipefail
a=$1
b=$2
runs=${3:-6}
here=$(dirname "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT

echo "## post-burst"
"$here/ab.sh" -n "$runs" "$a" "$b" -- bench/micro/spool-post-burst 2 5000000 1 | tee "$log"
echo "# rate, M tasks/s"
"$here/summary.py" "$log" 0
echo "# submitter CPU per post, us"
"$here/summary.py" "$log" 4/0

csv_of() {  # csv_of ARGS...: one spool-bench run, its CSV rows on stdout
  printf '%s\n' 'out=$(mktemp --suffix=.csv); $AB_BUILD/bench/spool-bench "$@" --out "$out" >/dev/null 2>&1; tail -n +2 "$out"; rm -f "$out"'
}
echo "## latency"
"$here/ab.sh" -n "$runs" "$a" "$b" -- bash -c "$(csv_of)" _ latency --threads 2 --repeat 1 \
  --peers spool --tasks 20000 | tee "$log"
for v in "own wait" "flag hand-off" "future run by a worker"; do
  echo "# $v, p50 us"
  "$here/summary.py" "$log" 8 "$v"
done

echo "## timers, 100 per second"
"$here/ab.sh" -n "$((runs / 2 > 0 ? runs / 2 : 1))" "$a" "$b" -- bash -c "$(csv_of)" _ timers \
  --threads 2 --repeat 1 --peers spool --tasks 1000 | tee "$log"
echo "# p99 lateness, us (the notes carry cores=)"
"$here/summary.py" "$log" 8
