#!/usr/bin/env bash
# Install test: build spool (release), `cmake --install` it into a fresh temporary
# prefix, check that every header of include/ is installed and that each public C++ header
# compiles on its own there, then build and run outside consumers against that prefix only:
#   1. CMake:      find_package(spool) via CMAKE_PREFIX_PATH -> spool::spool and spool::spool_static,
#                  and the queue: spool::queue, spool::queue_static, its C API, bin/spool-queue
#   2. pkg-config: cc main.c $(pkg-config --cflags --libs spool)           (libspool.so, LD_LIBRARY_PATH)
#   3. pkg-config: cc main.c $(pkg-config --cflags --static --libs spool)  (libspool.a)
#   4. tpool:      a program written for tpool, unchanged, with -I<prefix>/include/spool -lspool
#   5. dlopen:     a C program not linked with libspool loads libspool.so.0 and runs tasks
#
# Environment:
#   SPOOL_INSTALL_BUILD_DIR  library build dir (default: <repo>/build/install-test)
#   KEEP_TMP=1               keep the temporary prefix/consumer build dirs
#   CC, CXX, CMAKE_GENERATOR as usual (defaults: cc, c++, Ninja when available)
set -euo pipefail
# NB: no `producer | grep -q` pipelines here: with pipefail, grep -q exiting at the
# first match can kill the producer with SIGPIPE and fail the pipeline spuriously.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build="${SPOOL_INSTALL_BUILD_DIR:-$repo/build/install-test}"
cc="${CC:-cc}"
cxx="${CXX:-c++}"
gen="${CMAKE_GENERATOR:-}"
if [[ -z "$gen" ]] && command -v ninja >/dev/null 2>&1; then gen=Ninja; fi
gen_args=()
[[ -n "$gen" ]] && gen_args=(-G "$gen")

step() { printf '\n--- install-test: %s\n' "$*"; }
fail() {
  printf '\n************************************************************\n' >&2
  printf '*** INSTALL TEST FAILED: %s\n' "$*" >&2
  printf '************************************************************\n' >&2
  exit 1
}
trap 'fail "command failed (line $LINENO): $BASH_COMMAND"' ERR

tmp="$(mktemp -d "${TMPDIR:-/tmp}/spool-install-test.XXXXXX")"
cleanup() {
  if [[ "${KEEP_TMP:-0}" == 1 ]]; then echo "install-test: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
prefix="$tmp/prefix"

# --- 1. build + install the library -----------------------------------------
step "configure + build library (release) in $build"
cmake -S "$repo" -B "$build" "${gen_args[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DSPOOL_BUILD_TESTS=OFF -DSPOOL_BUILD_EXAMPLES=OFF -DSPOOL_SANITIZE=
cmake --build "$build"

step "cmake --install into fresh prefix $prefix"
cmake --install "$build" --prefix "$prefix"
( cd "$prefix" && find . -type f -o -type l | sort | sed 's/^/    /' )

libdir=""
for d in "$prefix/lib" "$prefix"/lib/*-linux-gnu "$prefix/lib64"; do
  if [[ -f "$d/pkgconfig/spool.pc" ]]; then libdir="$d"; break; fi
done
[[ -n "$libdir" ]] || fail "spool.pc not installed under $prefix/lib*/pkgconfig"
for f in "$libdir/libspool.so" "$libdir/libspool.so.0" "$libdir/libspool.a" \
         "$libdir/cmake/spool/spoolConfig.cmake" "$libdir/cmake/spool/spoolConfigVersion.cmake" \
         "$libdir/cmake/spool/spoolTargets.cmake" \
         "$prefix/include/spool/spool.hpp" "$prefix/include/spool/spool.h" \
         "$prefix/include/spool/tpool.h"; do
  [[ -e "$f" ]] || fail "missing installed file: ${f#"$prefix"/}"
done
# Every header of the source tree is installed (detail/ included: the public templates need
# it), and each public header compiles on its own against the prefix alone.
while IFS= read -r h; do
  [[ -e "$prefix/include/$h" ]] || fail "missing installed header: include/$h"
done < <(cd "$repo/include" && find spool -type f \( -name '*.h' -o -name '*.hpp' \) | LC_ALL=C sort)
step "each installed public C++ header compiles alone ($cxx -fsyntax-only)"
while IFS= read -r h; do
  "$cxx" -std=c++20 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" -x c++ - \
    <<<"#include <$h>" || fail "installed header $h does not compile alone"
done < <(cd "$prefix/include" && find spool -maxdepth 1 -type f -name '*.hpp' | LC_ALL=C sort)
soname="$(readelf -d "$libdir/libspool.so" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')"
[[ "$soname" == libspool.so.0 ]] || fail "SONAME is '$soname', expected libspool.so.0"

# --- 2. CMake consumer --------------------------------------------------------
step "CMake consumer (find_package(spool) via CMAKE_PREFIX_PATH)"
cmake -S "$here/cmake" -B "$tmp/cmake-consumer" "${gen_args[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
  -DCMAKE_BUILD_TYPE=Release
found="$(sed -n 's/^spool_DIR:PATH=//p' "$tmp/cmake-consumer/CMakeCache.txt")"
[[ "$(realpath "$found")" == "$(realpath "$libdir/cmake/spool")" ]] \
  || fail "find_package(spool) found '$found', not the fresh prefix"
cmake --build "$tmp/cmake-consumer"
"$tmp/cmake-consumer/consumer_shared" || fail "CMake consumer (spool::spool) failed"
grep -qF "$libdir/libspool.so.0" <<<"$(ldd "$tmp/cmake-consumer/consumer_shared")" \
  || fail "consumer_shared does not load libspool.so.0 from the prefix"
"$tmp/cmake-consumer/consumer_static" || fail "CMake consumer (spool::spool_static) failed"
if grep -q 'NEEDED.*libspool' <<<"$(readelf -d "$tmp/cmake-consumer/consumer_static")"; then
  fail "consumer_static depends on libspool.so"
fi

# --- 2b. the queue (libspool_queue, spool-queue) ------------------------------
step "CMake consumer of the queue (spool::queue, spool::queue_static, the C API)"
for f in "$libdir/libspool_queue.so" "$libdir/libspool_queue.so.0" "$libdir/libspool_queue.a" \
         "$prefix/include/spool/queue.hpp" "$prefix/include/spool/queue.h" \
         "$prefix/include/spool/queue/worker.hpp" "$prefix/bin/spool-queue"; do
  [[ -e "$f" ]] || fail "missing installed file: ${f#"$prefix"/}"
done
cmake -S "$here/queue" -B "$tmp/queue-consumer" "${gen_args[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release
cmake --build "$tmp/queue-consumer"
"$tmp/queue-consumer/queue_consumer_shared" || fail "queue consumer (spool::queue) failed"
grep -qF "$libdir/libspool_queue.so.0" <<<"$(ldd "$tmp/queue-consumer/queue_consumer_shared")" \
  || fail "queue_consumer_shared does not load libspool_queue.so.0 from the prefix"
"$tmp/queue-consumer/queue_consumer_static" || fail "queue consumer (spool::queue_static) failed"
if grep -q 'NEEDED.*libspool' <<<"$(readelf -d "$tmp/queue-consumer/queue_consumer_static")"; then
  fail "queue_consumer_static depends on a libspool*.so"
fi
"$tmp/queue-consumer/queue_consumer_c" || fail "queue C consumer failed"
"$prefix/bin/spool-queue" --help | grep -q "worker --queue" || fail "installed spool-queue --help"

# --- 3. pkg-config consumers --------------------------------------------------
export PKG_CONFIG_PATH="$libdir/pkgconfig"
step "pkg-config: spool $(pkg-config --modversion spool)"
echo "    --cflags:         $(pkg-config --cflags spool)"
echo "    --libs:           $(pkg-config --libs spool)"
echo "    --static --libs:  $(pkg-config --static --libs spool)"
[[ "$(pkg-config --modversion spool)" == 0.1.0 ]] || fail "pkg-config --modversion != 0.1.0"

step "pkg-config consumer, shared: cc main.c \$(pkg-config --cflags --libs spool)"
# shellcheck disable=SC2046
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/c_shared" "$here/pkgconfig/main.c" \
  $(pkg-config --cflags --libs spool)
grep -q 'NEEDED.*libspool\.so\.0' <<<"$(readelf -d "$tmp/c_shared")" || fail "c_shared does not need libspool.so.0"
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/c_shared" \
  || fail "pkg-config shared consumer failed"

step "pkg-config consumer, static: cc main.c \$(pkg-config --cflags --static --libs spool)"
# libspool.so and libspool.a share a directory, and -lspool would pick the .so;
# -l:libspool.a forces the archive while keeping pkg-config's -L and Libs.private.
static_libs="$(pkg-config --static --libs spool | sed -E 's/(^|[[:space:]])-lspool([[:space:]]|$)/\1-l:libspool.a\2/')"
echo "    link flags: $static_libs"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/c_static" "$here/pkgconfig/main.c" \
  $(pkg-config --cflags spool) $static_libs
if grep -q 'NEEDED.*libspool' <<<"$(readelf -d "$tmp/c_static")"; then
  fail "c_static depends on libspool.so (not linked statically)"
fi
env -u LD_LIBRARY_PATH "$tmp/c_static" || fail "pkg-config static consumer failed"

# --- 4. an unchanged tpool program ---------------------------------------------
step "tpool drop-in: cc -I<prefix>/include/spool quicksort.c -L<libdir> -lspool"
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/tpool_quicksort" "$here/tpool/quicksort.c" \
  -I"$prefix/include/spool" -L"$libdir" -lspool
LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/tpool_quicksort" \
  || fail "the tpool program failed"

# --- 5. loaded with dlopen() ---------------------------------------------------
step "dlopen: a program not linked with libspool loads libspool.so.0 and runs tasks"
# The library's thread-local state uses the initial-exec model (src/README.md, "Thread-local
# storage"): the dynamic section says so, and loading it after start-up must still work.
grep -q 'FLAGS.*STATIC_TLS' <<<"$(readelf -d "$libdir/libspool.so.0")" \
  || fail "libspool.so.0 is not marked STATIC_TLS (initial-exec thread-locals expected)"
"$cc" -std=c11 -Wall -Wextra -Werror -o "$tmp/dlopen_consumer" "$here/dlopen/main.c" \
  -I"$prefix/include" -ldl
if grep -q 'NEEDED.*libspool' <<<"$(readelf -d "$tmp/dlopen_consumer")"; then
  fail "dlopen_consumer is linked with libspool (it must load it with dlopen)"
fi
"$tmp/dlopen_consumer" "$libdir/libspool.so.0" || fail "the dlopen consumer failed"

printf '\ninstall-test: ALL OK (cmake shared+static, the queue, pkg-config shared+static, tpool drop-in, dlopen)\n'
