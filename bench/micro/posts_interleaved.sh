#!/usr/bin/env bash
# posts_interleaved.sh: 5M empty posts from one thread, spool's paths and the peers
# interleaved in one run, a fresh process for each, so that the host's placement of its
# virtual CPUs (BENCHMARKS.md, "The machine") falls on every contender alike.
#
#   bench/micro/posts_interleaved.sh [ROUNDS [N [BUILD]]]     (defaults 5 5000000 build/release)
#
# Each round runs, in turn: spool-post-burst unbounded, with bounded:1024:caller_runs
# (OpenMP's policy: run a task in the submitter when the queue is full) and with
# bounded:1024:block (the default policy), one repeat each; then spool-bench empty with
# OpenMP and the textbook mutex pool, one repeat. Prints one CSV line per contender per round:
#   round,contender,M posts/s,run by submitter,cross-CPU round trip ns
# (spool-bench's lines give the submitter's share as its by_submitter and no round trip.)
set -euo pipefail
rounds=${1:-5}
n=${2:-5000000}
build=${3:-build/release}
burst="$build/bench/micro/spool-post-burst"
bench="$build/bench/spool-bench"
for exe in "$burst" "$bench"; do
  [[ -x $exe ]] || { echo "posts_interleaved.sh: $exe is not built" >&2; exit 2; }
done
echo "round,contender,M posts/s,run by submitter,cross-CPU round trip ns"
for ((r = 1; r <= rounds; r++)); do
  for mode in unbounded bounded:1024:caller_runs bounded:1024:block; do
    arg=()
    [[ $mode == unbounded ]] || arg=("$mode")
    # The repeat's line: the rate first, the round trip and the submitter's share last.
    "$burst" 2 "$n" 1 "${arg[@]}" | awk -F, -v r="$r" -v m="spool $mode" \
      '/^[0-9]/ { printf "%s,%s,%s,%s,%s\n", r, m, $1, $12, $11 }'
  done
  "$bench" empty --n "$n" --threads 2 --repeat 1 --peers omp,mutex_pool |
    awk -v r="$r" '$2 == "fire-and-forget" {
      rate = $6; mult = 1
      if (rate ~ /G$/) mult = 1000; else if (rate ~ /k$/) mult = 0.001
      sub(/[GMk]$/, "", rate)
      share = "n/a"
      for (i = 1; i <= NF; ++i) if ($i ~ /^by_submitter=/) { share = $i; sub(/^by_submitter=/, "", share) }
      printf "%s,%s,%.2f,%s,n/a\n", r, $4, rate * mult, share
    }'
done
