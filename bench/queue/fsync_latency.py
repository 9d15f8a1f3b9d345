#!/usr/bin/env python3
"""How long each fdatasync (and fsync) took on the whole machine while a command ran.

    bench/queue/fsync_latency.py -- COMMAND [ARGS...]

Records the syscall tracepoints sys_enter/sys_exit of fdatasync and fsync on every CPU with
`perf record -a` (Debian's linux-perf; root) while COMMAND runs, pairs each entry with its
thread's exit, and prints the count and the distribution of the durations (µs), with the
number over 1 and 2 ms. Run around `bench/queue/run.py ... --fsync always`, it shows the
fsyncs that redis-server's `appendfsync always` made (the other processes of the benchmark
make none), which a job's start waits for. Bench tooling: no test runs it.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile

EVENTS = ("syscalls:sys_enter_fdatasync", "syscalls:sys_exit_fdatasync",
          "syscalls:sys_enter_fsync", "syscalls:sys_exit_fsync")
LINE = re.compile(r"\s(\d+)\s+\[\d+\]\s+([\d.]+):\s+syscalls:sys_(enter|exit)_f(?:data)?sync")


def durations_us(script_text):
    started, out = {}, []
    for line in script_text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        tid, t, kind = m.group(1), float(m.group(2)), m.group(3)
        if kind == "enter":
            started[tid] = t
        elif tid in started:
            out.append((t - started.pop(tid)) * 1e6)
    return sorted(out)


def main():
    argv = sys.argv[1:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        sys.exit(__doc__)
    perf = shutil.which("perf")
    if not perf:
        sys.exit("fsync_latency: perf is not installed (apt-get install linux-perf)")
    work = tempfile.mkdtemp(prefix="fsync-latency.")
    data = os.path.join(work, "perf.data")
    try:
        events = [a for e in EVENTS for a in ("-e", e)]
        rc = subprocess.run([perf, "record", "-q", "-a", "-o", data, *events, "--", *argv]).returncode
        text = subprocess.run([perf, "script", "-i", data], capture_output=True, text=True,
                              check=True).stdout
    finally:
        shutil.rmtree(work, ignore_errors=True)
    d = durations_us(text)
    if not d:
        print("fsync_latency: no fsync was made")
        return rc
    n = len(d)
    pick = lambda q: d[min(n - 1, int(n * q))]  # noqa: E731
    print(f"{n} fsyncs, µs: p50 {pick(0.5):.0f}, p90 {pick(0.9):.0f}, p99 {pick(0.99):.0f}, "
          f"p99.9 {pick(0.999):.0f}, max {d[-1]:.0f}; over 1 ms: {sum(x > 1000 for x in d)}, "
          f"over 2 ms: {sum(x > 2000 for x in d)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
