#!/usr/bin/env bash
# single_profile.sh: where a single-submit job's time goes on one redis-server.
#
#   bench/queue/single_profile.sh [BUILD] [FSYNC] [JOBS] [WORKERS]
#
# BUILD (default build/release) holds spool's queue drivers (bench/queue/spool); FSYNC is
# redis's appendfsync (default always); JOBS (default 2000) jobs; WORKERS worker processes of
# 2 threads (default 1). Starts redis-server on a free port of 127.0.0.1 with its AOF under
# build/bench-queue, and prints:
#   - the floor: the producer alone (no worker) submitting JOBS jobs one at a time, three
#     times (`producer --submit-only`): one thread's acknowledged submissions per second;
#   - the same JOBS jobs end to end with the workers running (`producer --mode single`);
#   - per job, from that run: redis's fdatasync calls (perf's syscalls tracepoint, when perf
#     is there), its CPU (utime + stime from /proc), and each command's calls and time
#     (INFO commandstats; FCALL's time includes the commands its functions run).
# Bench tooling: it needs perf (linux-perf) for the fsync count and prints "n/a" without it.
set -euo pipefail
build=${1:-build/release}
fsync=${2:-always}
jobs=${3:-2000}
workers=${4:-1}
bin=$build/bench/queue/spool
[[ -x $bin/producer && -x $bin/worker ]] || { echo "no drivers in $bin (build the targets spool_queue_bench_worker spool_queue_bench_producer)" >&2; exit 2; }
mkdir -p build/bench-queue
dir=$(mktemp -d build/bench-queue/profile.XXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
redis-server --port "$port" --bind 127.0.0.1 --dir "$PWD/$dir" --appendonly yes --appendfsync "$fsync" \
  --save "" --auto-aof-rewrite-percentage 0 --daemonize yes --logfile "$PWD/$dir/redis.log" \
  --pidfile "$PWD/$dir/redis.pid" >/dev/null
until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
redis_pid=$(cat "$dir/redis.pid")
url=redis://127.0.0.1:$port/0
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); appendfsync $fsync; $jobs jobs; $workers worker(s) x 2 threads"
echo "# floor: the producer alone, one submission at a time"
for i in 1 2 3; do
  "$bin/producer" --redis "$url" --queue "floor$i" --jobs "$jobs" --mode single --submit-only |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print("  %.0f submissions/s (%.1f us each)" % (r["jobs"]/r["submit_s"], 1e6*r["submit_s"]/r["jobs"]))'
done
for i in $(seq "$workers"); do
  "$bin/worker" --redis "$url" --queue q --concurrency 2 >"$dir/worker$i.out" 2>&1 &
  pids+=($!)
done
for i in $(seq "$workers"); do until grep -q ready "$dir/worker$i.out"; do sleep 0.05; done; done
"$bin/producer" --redis "$url" --queue q --jobs 200 --mode single >/dev/null  # warm-up
redis-cli -p "$port" config resetstat >/dev/null
cpu_ticks() { awk '{print $14 + $15}' "/proc/$redis_pid/stat"; }
before=$(cpu_ticks)
perf_out=$dir/perf.txt
perf_pid=
if command -v perf >/dev/null 2>&1; then
  perf stat -e syscalls:sys_enter_fdatasync -e syscalls:sys_enter_fsync -p "$redis_pid" -o "$perf_out" &
  perf_pid=$!
  sleep 0.3
fi
result=$("$bin/producer" --redis "$url" --queue q --jobs "$jobs" --mode single)
[[ -n $perf_pid ]] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
after=$(cpu_ticks)
echo "# end to end, with the workers"
echo "$result" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("  %.0f jobs/s" % (r["jobs"]/r["done_s"]))'
hz=$(getconf CLK_TCK)
python3 - "$jobs" "$before" "$after" "$hz" "$perf_out" <<'PY'
import re, subprocess, sys
jobs, before, after, hz, perf = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
print("  redis CPU per job: %.0f us" % ((after - before) / hz * 1e6 / jobs))
try:
    text = open(perf).read()
    syncs = sum(int(m.replace(",", "")) for m in re.findall(r"^\s*([\d,]+)\s+syscalls:sys_enter_f(?:data)?sync", text, re.M))
    print("  redis fsyncs per job: %.2f (perf, from the warm-up's end; the count includes the gap before the run)" % (syncs / jobs))
except OSError:
    print("  redis fsyncs per job: n/a (no perf)")
PY
echo "# redis commands per job (calls, us per call, us per job)"
port=$port jobs=$jobs python3 - <<'PY'
import os, subprocess
port, jobs = os.environ["port"], int(os.environ["jobs"])
out = subprocess.run(["redis-cli", "-p", port, "info", "commandstats"], capture_output=True, text=True).stdout
rows = []
for line in out.splitlines():
    if not line.startswith("cmdstat_"):
        continue
    name, _, rest = line.partition(":")
    f = dict(kv.split("=") for kv in rest.split(","))
    if name in ("cmdstat_config", "cmdstat_info"):
        continue
    rows.append((int(f["usec"]) / jobs, name[8:], int(f["calls"]) / jobs, float(f["usec_per_call"])))
for us, name, calls, per in sorted(rows, reverse=True)[:12]:
    print("  %-14s %5.2f calls  %6.2f us/call  %6.1f us/job" % (name, calls, per, us))
PY
