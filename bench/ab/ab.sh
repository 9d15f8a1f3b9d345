#!/usr/bin/env bash
# ab.sh: builds two commits side by side and runs one command against each, interleaved.
#
#   bench/ab/ab.sh [-n RUNS] [-t TARGETS] [-d DIR] REV_A REV_B -- COMMAND [ARGS...]
#
# Each revision is checked out into a worktree of its own under DIR (default build/ab/) and
# built Release (RelWithDebInfo, tests off) with only TARGETS (default: spool-bench and
# spool-post-burst); a tree already built at that commit is reused, and a REV written
# dir:PATH names a build directory to use as it is (e.g. dir:build/release, the working
# tree's own build, uncommitted changes included), and a REV written REV+PATCH is REV with the
# patch file PATCH (a path in the working tree, e.g. a prototype kept under bench/) applied to
# its worktree before the build. COMMAND is a path inside
# the build directory (e.g. bench/micro/spool-post-burst) or a program on PATH that finds the
# tree in $AB_BUILD; it then runs RUNS times (default 5) for each revision, A B A B ..., so
# that the machine's drift hits both alike. Every output line goes to stdout prefixed with
# "REV,RUN,LOAD1," (LOAD1: the 1-minute load average when the run started); bench/ab/summary.py
# turns such a log into min/median/max per revision.
set -euo pipefail

runs=5
targets="spool-bench spool-post-burst"
root=$(git rev-parse --show-toplevel)
dir="$root/build/ab"
while getopts "n:t:d:" opt; do
  case $opt in
    n) runs=$OPTARG ;;
    t) targets=$OPTARG ;;
    d) dir=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -lt 4 || $3 != "--" ]]; then
  echo "usage: bench/ab/ab.sh [-n RUNS] [-t TARGETS] [-d DIR] REV_A REV_B -- COMMAND [ARGS...]" >&2
  exit 2
fi
revs=("$1" "$2")
shift 3

build_tree() {  # build_tree REV -> prints the build directory
  local sha src build
  if [[ $1 == dir:* ]]; then
    realpath "${1#dir:}"
    return
  fi
  local rev=${1%%+*} patch="" name
  [[ $1 == *+* ]] && patch=$(realpath "${1#*+}")
  sha=$(git -C "$root" rev-parse --short=12 "$rev^{commit}")
  name=$sha
  [[ -n $patch ]] && name="$sha+$(basename "$patch" .patch)"
  src="$dir/src-$name"
  build="$dir/build-$name"
  if [[ ! -d $src ]]; then
    git -C "$root" worktree add --detach "$src" "$sha" >&2
    [[ -n $patch ]] && git -C "$src" apply "$patch" >&2
  fi
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPOOL_SANITIZE= \
    -DSPOOL_BUILD_TESTS=OFF -DSPOOL_WERROR=OFF >/dev/null
  # shellcheck disable=SC2086
  nice -n 10 cmake --build "$build" --target $targets >&2
  echo "$build"
}

builds=()
for rev in "${revs[@]}"; do builds+=("$(build_tree "$rev")"); done

for ((run = 1; run <= runs; run++)); do
  for i in 0 1; do
    build=${builds[$i]}
    cmd=$1
    [[ -x $build/$cmd ]] && cmd=$build/$cmd
    load=$(cut -d' ' -f1 /proc/loadavg)
    AB_BUILD=$build "$cmd" "${@:2}" 2>&1 | sed "s|^|${revs[$i]},$run,$load,|"
  done
done
