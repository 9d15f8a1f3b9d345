#!/usr/bin/env bash
# Run a command (e.g. ctest, or a single test binary) with the sanitizer runtime
# options spool's CI uses, and with ASLR disabled when possible.
#
#   scripts/sanitizer-env.sh thread  ctest --test-dir build/tsan --output-on-failure
#   scripts/sanitizer-env.sh address build/asan/tests/test_pool --gtest_filter=...
#
# Why ASLR is disabled: gcc-12's sanitizer runtimes predate kernels with
# vm.mmap_rnd_bits > 28 (e.g. 32 on recent Ubuntu/Fedora kernels). There TSan
# dies at start with "FATAL: ThreadSanitizer: unexpected memory mapping" and
# ASan intermittently hangs/crashes ("AddressSanitizer:DEADLYSIGNAL"). Running
# under `setarch $(uname -m) -R` (ADDR_NO_RANDOMIZE personality, inherited by
# all child processes) avoids both. If setarch is not permitted (some container
# seccomp profiles forbid personality()), the command runs as-is.
#
# Caller-supplied *SAN_OPTIONS are appended, so they override these defaults.
set -euo pipefail

usage() { echo "usage: $0 <thread|address> <command> [args...]" >&2; exit 2; }
(($# >= 2)) || usage
kind=$1
shift

case "$kind" in
  thread|tsan)
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
    ;;
  address|asan)
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
    ;;
  *) usage ;;
esac

arch="$(uname -m)"
if command -v setarch >/dev/null 2>&1 && setarch "$arch" -R true >/dev/null 2>&1; then
  exec setarch "$arch" -R "$@"
fi

rnd_bits="$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)"
if ((rnd_bits > 28)); then
  echo "sanitizer-env: WARNING: cannot disable ASLR (setarch -R failed) and" \
       "vm.mmap_rnd_bits=$rnd_bits > 28; gcc-12 sanitizers may crash or hang." \
       "Fix: sudo sysctl vm.mmap_rnd_bits=28" >&2
fi
exec "$@"
