#!/bin/sh
# spool_only_pair.sh: two spool-bench builds side by side, spool's rows only (no peers), so that
# a pair fits in a couple of minutes: `empty` at 200k and 5M tasks in ROUNDS interleaved rounds
# (A B A B ...), then latency, unbalanced, fib and quicksort once each.
#
#   THREADS=16 bench/ab/spool_only_pair.sh BENCH_A BENCH_B [ROUNDS] > LOG
#
# BENCH_A and BENCH_B are spool-bench binaries (e.g. build/ab/build-<sha>/bench/spool-bench,
# built by ab.sh). THREADS (default 16) is the pool size of every run; meant for a host with
# at least that many cores. Each line of the log is a table row of spool-bench under a
# "== BENCH round N EXPERIMENT" header.
set -u
a=$1
b=$2
rounds=${3:-2}
t=${THREADS:-16}
grep -m1 'model name' /proc/cpuinfo
echo "cores: $(nproc)   threads: $t"
r=1
while [ "$r" -le "$rounds" ]; do
  for bench in "$a" "$b"; do
    echo "== $bench round $r empty"
    timeout 60 "$bench" empty --n 200000,5000000 --threads "$t" --repeat 3 --peers spool 2>&1 |
      grep -E '^empty '
  done
  r=$((r + 1))
done
for bench in "$a" "$b"; do
  echo "== $bench round 1 others"
  timeout 30 "$bench" latency --tasks 20000 --threads "$t" --repeat 3 --peers spool 2>&1 |
    grep -E '^latency '
  timeout 30 "$bench" unbalanced --threads "$t" --repeat 3 --peers spool 2>&1 |
    grep -E '^unbalanced '
  timeout 30 "$bench" fib --threads "$t" --repeat 5 --peers spool 2>&1 | grep -E '^fib '
  timeout 30 "$bench" quicksort --quick --threads "$t" --repeat 3 --peers spool 2>&1 |
    grep -E '^quicksort '
done
