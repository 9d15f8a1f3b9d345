#!/usr/bin/env python3
"""Where a single-submit job's time goes, on one redis-server.

    bench/queue/single_profile.py [--spool-bin DIR] [--fsync always|everysec] [--jobs N]
                                  [--workers W] [--claimed]

Starts redis-server as run.py does (harness/redis_server.py: a free loopback port, its AOF in a
directory under build/bench-queue) and prints:
  - the floor: spool's producer alone (no worker) submitting N jobs one at a time, three times
    (`producer --submit-only`): one thread's acknowledged submissions per second;
  - the same N jobs end to end with W worker processes of 2 threads (`producer --mode single`;
    with --claimed the workers run with --no-direct, so every job is claimed);
  - per job of that run: redis-server's fsyncs (perf's syscall tracepoints, when perf is
    installed; "n/a" without it), its CPU (harness/proc_cpu.py), and each command's calls and
    time (INFO commandstats; FCALL's time includes the commands its functions run).
Bench tooling: no test runs it.
"""

import argparse
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))  # wire.py: the Redis client
from harness import processes, proc_cpu, redis_server, report, systems  # noqa: E402

PRODUCER_LIMIT_S = 300


def submissions_per_s(result):
    return result["jobs"] / result["submit_s"]


class FsyncCount:
    """perf stat counting redis-server's fsyncs, enabled and disabled through perf's control
    fifos, each command acknowledged, so that the count covers exactly what lies between
    start() and stop(). count() is None without perf, or if perf did not answer."""

    ACK_LIMIT_S = 10

    def __init__(self, pid, directory):
        self.out = os.path.join(directory, "perf.txt")
        self.proc = None
        perf = shutil.which("perf")
        if not perf:
            return
        ctl, ack = os.path.join(directory, "perf.ctl"), os.path.join(directory, "perf.ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # Read-write opens of a fifo do not wait for the other end.
        self.ctl = os.open(ctl, os.O_RDWR)
        self.ack = os.open(ack, os.O_RDWR)
        self.proc = subprocess.Popen(
            [perf, "stat", "-e", "syscalls:sys_enter_fdatasync", "-e", "syscalls:sys_enter_fsync",
             "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-p", str(pid), "-o", self.out],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def _command(self, word):
        if self.proc is None:
            return False
        os.write(self.ctl, word.encode() + b"\n")
        ready, _, _ = select.select([self.ack], [], [], self.ACK_LIMIT_S)
        if not ready or not os.read(self.ack, 16).startswith(b"ack"):
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return False
        return True

    def start(self):
        self._command("enable")

    def stop(self):
        self._command("disable")

    def count(self):
        if self.proc is None:
            return None
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()
        os.close(self.ctl)
        os.close(self.ack)
        try:
            with open(self.out) as f:
                text = f.read()
        except OSError:
            return None
        counts = re.findall(r"^\s*([\d,]+)\s+syscalls:sys_enter_f(?:data)?sync", text, re.M)
        return sum(int(c.replace(",", "")) for c in counts) if counts else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spool-bin", default=systems.default_spool_bin(),
                    help="where spool's worker and producer are (default build/release/...)")
    ap.add_argument("--fsync", default="always", choices=("always", "everysec"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--claimed", action="store_true",
                    help="every job claimed by its worker (the worker's --no-direct)")
    a = ap.parse_args()
    if a.jobs < 1 or a.workers < 1:
        ap.error("--jobs and --workers must be at least 1")
    spool = systems.spool(os.path.join(a.spool_bin, "worker"),
                          os.path.join(a.spool_bin, "producer"))[1 if a.claimed else 0]
    if spool.missing:
        sys.exit(f"single_profile: {spool.missing}")

    base = systems.default_env_dir()
    os.makedirs(base, exist_ok=True)
    work = tempfile.mkdtemp(prefix="profile.", dir=base)
    redis = redis_server.RedisServer(work, redis_server.binary_path("redis-server"))
    workers = None
    try:
        redis.set_fsync(a.fsync)
        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        print(f"# {report.cpu_model()}, {os.cpu_count()} CPUs; load {load}; appendfsync "
              f"{a.fsync}; {a.jobs} jobs; {a.workers} worker(s) x 2 threads"
              f"{', every job claimed' if a.claimed else ''}")
        print("# floor: the producer alone, one submission at a time")
        for i in range(3):
            argv = spool.producer(redis.url, f"floor{i}", a.jobs, mode="single") + ["--submit-only"]
            r, _ = processes.run_producer(spool, argv, work, f"floor{i}", PRODUCER_LIMIT_S)
            rate = submissions_per_s(r)
            print(f"  {rate:.0f} submissions/s ({1e6 / rate:.1f} us each)")

        workers = processes.Workers(spool, redis.url, "q", a.workers, 2, work, "profile")
        processes.run_producer(spool, spool.producer(redis.url, "q", 200, mode="single"), work,
                               "warmup", PRODUCER_LIMIT_S)
        redis.command("CONFIG", "RESETSTAT")
        fsync_count = FsyncCount(redis.pid, work)
        fsync_count.start()
        cpu_before = proc_cpu.tree_seconds([redis.pid])
        r, _ = processes.run_producer(spool, spool.producer(redis.url, "q", a.jobs, mode="single"),
                                      work, "profile", PRODUCER_LIMIT_S)
        cpu_after = proc_cpu.tree_seconds([redis.pid])
        fsync_count.stop()
        fsyncs = fsync_count.count()
        workers.check_alive()

        print("# end to end, with the workers")
        print(f"  {a.jobs / r['done_s']:.0f} jobs/s")
        print(f"  redis CPU per job: {(cpu_after - cpu_before) * 1e6 / a.jobs:.0f} us")
        if fsyncs is None:
            print("  redis fsyncs per job: n/a (no perf)")
        else:
            print(f"  redis fsyncs per job: {fsyncs / a.jobs:.2f} (perf)")
        print("# redis commands per job (calls, us per call, us per job)")
        rows = []
        for name, value in redis.info("commandstats").items():
            if name in ("cmdstat_config", "cmdstat_info"):
                continue
            f = dict(kv.split("=", 1) for kv in value.split(","))
            rows.append((int(f["usec"]) / a.jobs, name[len("cmdstat_"):],
                         int(f["calls"]) / a.jobs, float(f["usec_per_call"])))
        for us, name, calls, per in sorted(rows, reverse=True)[:12]:
            print(f"  {name:<14} {calls:5.2f} calls  {per:6.2f} us/call  {us:6.1f} us/job")
    finally:
        if workers is not None:
            workers.stop()
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
