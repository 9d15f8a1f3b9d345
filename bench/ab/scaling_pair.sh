#!/bin/sh
# scaling_pair.sh: two spool-bench builds side by side on a host with 16 or more cores: fib at
# 4, 8 and 16 threads in ROUNDS interleaved rounds (A B A B ...), then latency at 4 and 16
# threads and empty at 16, once each, all against oneTBB in the same run.
#
#   bench/ab/scaling_pair.sh BENCH_A BENCH_B [ROUNDS] > LOG
#
# BENCH_A and BENCH_B are spool-bench binaries (e.g. build/ab/<sha>/bench/spool-bench, built by
# ab.sh). Each line of the log is a table row of spool-bench, under a "== BENCH round N
# EXPERIMENT" header; compare spool's row with the peers' in the same block.
set -u
a=$1
b=$2
rounds=${3:-3}
r=1
while [ "$r" -le "$rounds" ]; do
  for bench in "$a" "$b"; do
    echo "== $bench round $r fib"
    timeout 60 "$bench" fib --threads 4,8,16 --repeat 7 --peers spool,tbb_task_group 2>&1 |
      grep -E '^fib '
  done
  r=$((r + 1))
done
for bench in "$a" "$b"; do
  echo "== $bench latency"
  timeout 60 "$bench" latency --tasks 20000 --threads 4,16 --repeat 3 \
    --peers spool,tbb_task_group,tbb_arena 2>&1 | grep -E '^latency '
  echo "== $bench empty"
  timeout 60 "$bench" empty --n 200000 --threads 16 --repeat 3 --peers spool,tbb_task_group 2>&1 |
    grep -E '^empty '
done
