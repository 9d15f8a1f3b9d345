#!/usr/bin/env bash
# child_measurement_test.sh SPOOL_BENCH CASE DIR: spool-bench's measurements in child processes
# (bench/child_measurement.hpp), through the real program; DIR holds its output.
#   same_rows  `empty --tiny` gives the same rows in child processes and with --same-process
#   killed     a child killed from outside (as the OOM killer would) ends spool-bench with exit
#              5 and a message naming the measurement, before any table
#   stopped    a child that hangs (stopped by SIGSTOP) is ended by the watchdog: exit 4 once the
#              --tiny limit of 30 s is up, and the child does not outlive spool-bench
set -euo pipefail
bench=$1 case=$2 dir=$3
mkdir -p "$dir"

fail() {
  echo "FAIL ($case): $*" >&2
  exit 1
}

# A CSV's rows without their figures: the point, the repeats, and whether it ran or is n/a.
rows() { awk -F, 'NR > 1 { print $1, $2, $3, $4, $5, $6, $7, $8, ($9 == "" ? "n/a" : "ran") }' "$1"; }

# The measurement's child process of spool-bench process $1, once it exists.
child_of() {
  for _ in $(seq 100); do
    if child=$(pgrep -P "$1"); then
      echo "$child"
      return
    fi
    sleep 0.1
  done
  fail "spool-bench started no child process within 10 s"
}

# Starts spool-bench measuring an idle pool for 20 s, in the background: a child to catch.
start_idle() {
  "$bench" idle --tiny --duration 20 --peers spool --threads 1 --repeat 1 >"$dir/out" 2>"$dir/err" &
  parent=$!
  child=$(child_of "$parent")
}

# Waits for spool-bench; fails unless it exited with $1 and said $2 on stderr, printing no table.
expect_exit() {
  local code=0
  wait "$parent" || code=$?
  cat "$dir/err" >&2
  [[ $code == "$1" ]] || fail "spool-bench exited with $code, not $1"
  grep -qF "$2" "$dir/err" || fail "no message '$2'"
  if grep -q '^idle ' "$dir/out"; then fail "a table was printed"; fi
}

case $case in
  same_rows)
    "$bench" empty --tiny --repeat 2 --out "$dir/children.csv" >"$dir/children.txt"
    "$bench" empty --tiny --repeat 2 --same-process --out "$dir/same.csv" >"$dir/same.txt"
    [[ -n $(rows "$dir/children.csv") ]] || fail "no rows"
    diff <(rows "$dir/children.csv") <(rows "$dir/same.csv") || fail "the rows differ"
    ;;
  killed)
    start_idle
    kill -KILL "$child"
    expect_exit 5 "spool-bench: idle 'idle 20s' on spool with 1 threads: the measurement's child process was killed by signal 9"
    ;;
  stopped)
    start_idle
    kill -STOP "$child"
    expect_exit 4 "spool-bench: idle 'idle 20s' on spool with 1 threads has not finished after 30 s"
    # It dies with spool-bench (PR_SET_PDEATHSIG): gone, or a zombie that init has yet to reap.
    for _ in $(seq 50); do
      state=$(awk '{ print $3 }' "/proc/$child/stat" 2>/dev/null || true)
      [[ -z $state || $state == Z ]] && exit 0
      sleep 0.1
    done
    fail "the child $child outlived spool-bench (state $state)"
    ;;
  *) fail "unknown case" ;;
esac
