#!/usr/bin/env bash
# bench/ab.sh: spool-bench on two commits of this repository, built side by side and run
# interleaved, with the ratio of each pair.
#
#   bench/ab.sh [-p PAIRS] [-o DIR] BASE NEW -- EXPERIMENT [ARGS...] [-- EXPERIMENT [ARGS...]]...
#
#   bench/ab.sh -p 8 f929032 HEAD -- empty --threads 2 --peers spool -- fib --threads 2 \
#       --peers spool -- latency --threads 2 --peers spool -- coro --threads 2 --peers spool
#
# BASE and NEW are any commits (a hash, a branch, HEAD). Each is checked out detached in
# DIR/src/<hash> (a git worktree) and built in DIR/build/<hash> (RelWithDebInfo, spool-bench
# only: no tests, examples or server), so both builds use the same compiler and flags. Then,
# for each experiment, PAIRS pairs of runs: each pair runs both builds once (--repeat 1 unless
# the arguments say otherwise), the first of each pair alternating between BASE and NEW
# (ABBA), each run writing its rows as JSON to DIR/runs/. The table gives, per variant and
# metric, the pair ratios NEW over BASE oriented so that > 1 means NEW is ahead (NEW/BASE for
# rates, BASE/NEW for times and latencies), as median (min-max) over the pairs, and the
# medians of the runs of each build. DIR defaults to build/ab. Worktrees are removed at the
# end; the builds are kept for the next run.
set -euo pipefail

usage() {
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

pairs=6
dir=build/ab
while getopts "p:o:h" opt; do
  case "$opt" in
    p) pairs=$OPTARG ;;
    o) dir=$OPTARG ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
(($# >= 4)) || usage
base_rev=$1
new_rev=$2
shift 2
[[ $1 == -- ]] || usage
shift
[[ $pairs =~ ^[1-9][0-9]*$ ]] || { echo "ab.sh: -p wants a positive count" >&2; exit 2; }

root=$(git rev-parse --show-toplevel)
cd "$root"
base=$(git rev-parse --verify "$base_rev^{commit}")
new=$(git rev-parse --verify "$new_rev^{commit}")
mkdir -p "$dir/src" "$dir/build" "$dir/runs"
dir=$(cd "$dir" && pwd)

# Experiments: the arguments split at each "--".
experiments=()
current=""
for arg in "$@"; do
  if [[ $arg == -- ]]; then
    [[ -n $current ]] && experiments+=("$current")
    current=""
  else
    current+="${current:+ }$(printf '%q' "$arg")"
  fi
done
[[ -n $current ]] && experiments+=("$current")
((${#experiments[@]} > 0)) || usage

build() {  # build <hash>: prints the spool-bench path
  local sha=$1 src="$dir/src/$1" out="$dir/build/$1"
  if [[ ! -x $out/bench/spool-bench ]]; then
    git worktree remove --force "$src" >/dev/null 2>&1 || true
    git worktree add --detach "$src" "$sha" >&2
    cmake -S "$src" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPOOL_SANITIZE= \
      -DSPOOL_BUILD_TESTS=OFF -DSPOOL_BUILD_EXAMPLES=OFF -DSPOOL_BUILD_SERVER=OFF \
      -DSPOOL_BUILD_BENCH=ON >&2
    nice -n 10 cmake --build "$out" --target spool-bench >&2
    git worktree remove --force "$src" >&2
  fi
  echo "$out/bench/spool-bench"
}

bench_base=$(build "$base")
bench_new=$(build "$new")
stamp=$(date +%Y%m%d-%H%M%S)
echo "# bench/ab.sh -p $pairs $base_rev $new_rev"
echo "# base $base"
echo "# new  $new"
echo "# cpu  $(lscpu | sed -n 's/^Model name: *//p' | head -1)"

for e in "${!experiments[@]}"; do
  args=${experiments[$e]}
  extra=""
  [[ " $args " == *" --repeat "* ]] || extra="--repeat 1"
  for ((i = 0; i < pairs; i++)); do
    order=(base new)
    ((i % 2 == 1)) && order=(new base)
    for which in "${order[@]}"; do
      if [[ $which == base ]]; then bin=$bench_base; else bin=$bench_new; fi
      out="$dir/runs/$stamp-e$e-p$i-$which.json"
      eval "\"$bin\" $args $extra --out \"$out\"" >/dev/null 2>"$dir/runs/$stamp-e$e-p$i-$which.err" ||
        { echo "ab.sh: $which run failed: $bin $args (see $dir/runs/$stamp-e$e-p$i-$which.err)" >&2; exit 1; }
    done
  done
  echo "# experiment: spool-bench $args $extra ($pairs pairs, ABBA)"
  python3 - "$dir/runs" "$stamp" "$e" "$pairs" <<'EOF'
import json, statistics, sys
runs, stamp, e, pairs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def rows(path):
    with open(path) as f:
        doc = json.load(f)
    return {(r["variant"], r["peer"], r["metric"], r["unit"]): r for r in doc["rows"]}

ratios, medians = {}, {}
for i in range(pairs):
    a = rows(f"{runs}/{stamp}-e{e}-p{i}-base.json")
    b = rows(f"{runs}/{stamp}-e{e}-p{i}-new.json")
    for key, ra in a.items():
        rb = b.get(key)
        va, vb = ra["value"]["median"], rb["value"]["median"] if rb else None
        if rb is None or va <= 0 or vb <= 0:
            continue
        ratios.setdefault(key, []).append(vb / va if ra["higher_is_better"] else va / vb)
        medians.setdefault(key, ([], []))
        medians[key][0].append(va)
        medians[key][1].append(vb)

print(f"{'variant':<32} {'peer':<8} {'metric':<14} {'ratio median (min-max)':<26} {'base':>10} {'new':>10} unit")
for key, rs in ratios.items():
    variant, peer, metric, unit = key
    r = f"{statistics.median(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})"
    ma, mb = (statistics.median(v) for v in medians[key])
    print(f"{variant:<32} {peer:<8} {metric:<14} {r:<26} {ma:>10.4g} {mb:>10.4g} {unit}")
EOF
done
