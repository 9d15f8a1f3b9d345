#!/usr/bin/env bash
# Builds the request-parser fuzz target (fuzz_request.cpp) with clang's libFuzzer and runs it for
# a bounded time.
#
#   tests/fuzz/run.sh <build-dir>     (ctest runs it as spoold_fuzz_request in release builds)
#
# Environment: SPOOLD_FUZZ_SECONDS (default 60); CXX_FUZZ (default clang++).
# The seeds in tests/fuzz/corpus/ are copied to a temporary working corpus under <build-dir>, so
# the inputs libFuzzer adds never land in the repository. Exit status 0: the run ended without a
# finding; non-zero: a build error, a crash, a sanitizer report or a violated invariant (its
# input is left in <build-dir>/crash-* or leak-*/timeout-*).
set -euo pipefail

usage() { echo "usage: $0 <build-dir>" >&2; exit 2; }
(($# == 1)) || usage

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
seconds="${SPOOLD_FUZZ_SECONDS:-60}"
cxx="${CXX_FUZZ:-clang++}"

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds == 0)); then
  echo "run.sh: SPOOLD_FUZZ_SECONDS must be a positive number of seconds (got '$seconds')" >&2
  exit 2
fi
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "run.sh: '$cxx' not found. The fuzz target needs clang with libFuzzer;" \
       "scripts/install-deps.sh installs it (Debian package 'clang')." >&2
  exit 1
fi

mkdir -p "$1"
build_dir="$(cd "$1" && pwd)"
binary="$build_dir/fuzz_request"
# The server's version macro, as server/CMakeLists.txt defines it (the project() VERSION).
version="$(sed -n 's/^[[:space:]]*VERSION[[:space:]]\{1,\}\([0-9][0-9.]*\).*/\1/p' \
             "$repo/CMakeLists.txt" | head -n 1)"

echo "run.sh: building $binary with $cxx"
"$cxx" -std=c++20 -O1 -g -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Wall -Wextra -Werror \
  -DSPOOLD_VERSION="\"${version:-0.0.0}\"" -I"$repo/server" \
  "$here/fuzz_request.cpp" "$repo"/server/http/*.cpp -o "$binary"

work="$(mktemp -d "$build_dir/corpus.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$here"/corpus/* "$work"/

echo "run.sh: fuzzing for ${seconds}s (seeds: $(ls "$here/corpus" | wc -l), working corpus: $work)"
status=0
"$repo/scripts/sanitizer-env.sh" address "$binary" \
  -max_total_time="$seconds" -max_len=20000 -timeout=10 -rss_limit_mb=2048 \
  -dict="$here/http.dict" -artifact_prefix="$build_dir/" -print_final_stats=1 \
  "$work" || status=$?
if ((status != 0)); then
  echo "run.sh: FAILED (exit $status): the failing input is in $build_dir/ (crash-*, leak-*," \
       "timeout-* or oom-*); reproduce with: $binary <file>" >&2
  exit 1
fi
echo "run.sh: no findings in ${seconds}s"
