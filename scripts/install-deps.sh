#!/usr/bin/env bash
# Install the Debian packages spool needs to build and test.
#
# Idempotent and fast: a single dpkg-query call decides what is missing; when
# everything is already installed it exits immediately without touching the
# network. Only when something is missing does it run `apt-get update` and
# `apt-get install` (via sudo when not root).
#
# Environment:
#   SPOOL_SKIP_DEPS=1         do nothing
#   SPOOL_EXTRA_PACKAGES="a b" additional packages to require
set -euo pipefail

# ===========================================================================
# REQUIRED DEBIAN PACKAGES -- edit this list when a new dependency is needed
# (e.g. later: libtbb-dev, libboost-dev, redis-server, libsqlite3-dev, wrk,
#  siege, nginx, chromium, clang, clang-format ...). One package per line.
# ===========================================================================
PACKAGES=(
  g++            # C/C++ compiler (gcc-12 on Debian 12)
  cmake          # build system generator (>= 3.21)
  ninja-build    # build tool used by the Makefile
  make           # top-level driver (Makefile)
  pkg-config     # used by tests/install/run.sh (pkg-config consumer)
  googletest     # GoogleTest sources in /usr/src/googletest (built with sanitizers)
  libgtest-dev   # GoogleTest headers
  util-linux     # setarch (runs sanitizer tests with ASLR disabled)
  # spool-bench: the peers it measures spool against, its plots, its micro-benchmarks
  libtbb-dev     # oneTBB (task_group, task_arena)
  libboost-dev   # Boost.Asio thread_pool (header-only)
  gnuplot-nox    # --plot PNG charts
  libbenchmark-dev  # Google Benchmark for bench/micro
  # libspool: optional; with it, pinned workers steal from near victims first
  libhwloc-dev   # hwloc (CPU topology: cores, caches, NUMA nodes)
  # spoold: its stores, its tests (real Redis, SQLite, a browser, a fuzzer) and its benchmarks
  libsqlite3-dev   # the embedded guestbook store
  libhiredis-dev   # the Redis guestbook store
  libssl-dev       # OpenSSL: spoold's TLS, and spool-load-bench's TLS handshake client
  openssl          # the TLS tests make their certificates with it
  curl             # the TLS tests talk to spoold with it too
  redis-server     # started by the integration tests on a free port, and by make cluster
  redis-tools      # redis-cli: the queue's C API test loads a library of functions with it
  redis-sentinel   # make cluster and the fleet tests: failover of the guestbook's Redis
  haproxy          # make cluster and the fleet tests: the load balancer in front of the nodes
  iproute2         # the fault tests' network lab (cluster/netns.py): namespaces, veth, bridge
  nftables         # that lab's partitions: packets between two hosts dropped silently
  iptables         # that lab's latency: packets sent through a netfilter queue (NFQUEUE)
  libnetfilter-queue-dev  # tests/tools/netdelay.c, which holds those packets for a fixed time
  python3          # the integration tests (standard library only)
  python3-redis    # docs/queue.md's producer in Python, run by the queue's tests (redis-py)
  chromium         # headless browser tests of the guestbook and the dashboard
  chromium-driver  # WebDriver for those tests
  clang            # libFuzzer build of the request-parser fuzz target
  libclang-rt-dev  # that build's libFuzzer and ASan runtimes (a recommend of clang's, not pulled in)
  clang-format     # make format, and make lint's formatting check
  clang-tidy       # make lint's static checks (.clang-tidy)
  wrk              # spool-load-bench http: the load generator
  siege            # spool-load-bench siege: the paper's load generator
  nginx            # spool-load-bench http: the reference server
  gdb              # bench/load/spoold/memory_breakdown.py reads malloc's state in a running spoold
  libc6-dbg        # with glibc's debugging symbols (its arenas, the threads' tcaches)
)
# ===========================================================================

if [[ "${SPOOL_SKIP_DEPS:-0}" == 1 ]]; then
  exit 0
fi

# shellcheck disable=SC2206
PACKAGES+=(${SPOOL_EXTRA_PACKAGES:-})

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install-deps: dpkg-query not found (not a Debian-based system?)." >&2
  echo "install-deps: please install manually: ${PACKAGES[*]}" >&2
  exit 0
fi

# One dpkg-query call for all packages; unknown packages produce no "ii" line.
installed="$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${PACKAGES[@]}" 2>/dev/null || true)"
missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! grep -qE "^${pkg//+/\\+}(:[a-z0-9]+)? ii" <<<"$installed"; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#PACKAGES[@]} required packages are installed."
  exit 0
fi

echo "install-deps: missing packages: ${missing[*]}"
SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-deps: not root and sudo is not available; install as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
    exit 1
  fi
fi

"${SUDO[@]}" apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends -o DPkg::Lock::Timeout=300 "${missing[@]}"
echo "install-deps: installed: ${missing[*]}"
