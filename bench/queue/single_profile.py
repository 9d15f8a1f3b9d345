#!/usr/bin/env python3
"""Where a single-submit job's time goes, on one redis-server.

    bench/queue/single_profile.py [--spool-bin DIR] [--fsync always|everysec] [--jobs N]
                                  [--workers W] [--claimed]

Starts redis-server as run.py does (harness/redis_server.py: a free loopback port, its AOF in a
directory under build/bench-queue) and prints:
  - the floor: spool's producer alone (no worker) submitting N jobs one at a time, three times
    (`producer --submit-only`): one thread's acknowledged submissions per second, and the CPU
    that redis-server and the producer spent per submission;
  - the same N jobs end to end with W worker processes of 2 threads (`producer --mode single`;
    with --claimed the workers run with --no-direct, so every job is claimed);
  - per job of that run: redis-server's fsyncs (perf's syscall tracepoints, when perf is
    installed; "n/a" without it), its CPU, the worker processes' and the producer's CPU
    (harness/proc_cpu.py, the producer's rusage), and each command's calls and
    time (INFO commandstats; FCALL's time includes the commands its functions run);
  - with --turns (appendfsync always, perf): the run's turns of Redis's event loop, each one
    append to the AOF and one fsync, by what they wrote: a submission, an outcome, a worker's
    pop of its inbox, the producer's pop of its results, a claim. A write that arrives while
    Redis fsyncs another waits for that fsync and then its own, so the turns per job, more than
    the commands, are what a single-submit rate under always pays for;
  - a last line "summary: NAME=VALUE ..." for bench/ab/summary.py (jobs_per_s, floor_per_s,
    of_floor, floor_redis_cpu_us, floor_producer_cpu_us, redis_cpu_us, workers_cpu_us,
    producer_cpu_us, fsyncs_per_job, turns_per_job).
Under bench/ab/ab.sh, --spool-bin defaults to the revision's build ($AB_BUILD).
Bench tooling: no test runs it.
"""

import argparse
import collections
import os
import re
import select
import shutil
import signal
import statistics
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


class PerfSession:
    """A perf command on redis-server, enabled and disabled through perf's control fifos, each
    command acknowledged, so that what it records covers exactly what lies between start() and
    stop(). Without perf, or once perf did not answer, finish() returns False."""

    ACK_LIMIT_S = 10

    def __init__(self, directory, name, argv):
        self.proc = None
        perf = shutil.which("perf")
        if not perf:
            return
        ctl, ack = os.path.join(directory, name + ".ctl"), os.path.join(directory, name + ".ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        # Read-write opens of a fifo do not wait for the other end.
        self.ctl = os.open(ctl, os.O_RDWR)
        self.ack = os.open(ack, os.O_RDWR)
        self.proc = subprocess.Popen(
            [perf] + argv + ["-D", "-1", "--control", f"fifo:{ctl},{ack}"],
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

    def finish(self):
        if self.proc is None:
            return False
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait()
        os.close(self.ctl)
        os.close(self.ack)
        return True


class FsyncCount(PerfSession):
    """perf stat counting redis-server's fsyncs. count() is None without perf, or if perf did
    not answer."""

    def __init__(self, pid, directory):
        self.out = os.path.join(directory, "perf.txt")
        super().__init__(directory, "count",
                         ["stat", "-e", "syscalls:sys_enter_fdatasync", "-e",
                          "syscalls:sys_enter_fsync", "-p", str(pid), "-o", self.out])

    def count(self):
        if not self.finish():
            return None
        try:
            with open(self.out) as f:
                text = f.read()
        except OSError:
            return None
        counts = re.findall(r"^\s*([\d,]+)\s+syscalls:sys_enter_f(?:data)?sync", text, re.M)
        return sum(int(c.replace(",", "")) for c in counts) if counts else None


def aof_fd(pid):
    """redis-server's descriptor of the append-only file it appends to (Redis 7's incr file)."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.endswith(".incr.aof"):
            return int(fd), target
    return None, None


def resp_commands(data):
    """The commands of an append-only file's bytes (RESP arrays of bulk strings)."""
    out, i = [], 0
    while i < len(data):
        if data[i:i + 1] != b"*":
            raise ValueError(f"not a RESP array at byte {i}")
        j = data.index(b"\r\n", i)
        n, i, args = int(data[i + 1:j]), j + 2, []
        for _ in range(n):
            j = data.index(b"\r\n", i)
            length, i = int(data[i + 1:j]), j + 2
            if data[i + length:i + length + 2] != b"\r\n":
                raise ValueError(f"a bulk string cut at byte {i}")
            args.append(data[i:i + length].decode("latin-1"))
            i += length + 2
        out.append(args)
    return out


def writer_of(unit):
    """What wrote one unit of the AOF: the effects of one function call (MULTI ... EXEC), or
    one command. Told apart by the keys the functions of queue/functions.lua write."""
    words = [(c[0].upper(), c[1] if len(c) > 1 else "") for c in unit]
    names = {w for w, _ in words}
    if "XADD" in names and any(w == "INCR" and k.endswith(":seq") for w, k in words):
        return "submit"
    if "XACK" in names:
        return "finish"
    if len(unit) == 1 and words[0][0] in ("LPOP", "LMPOP", "RPOP"):
        key = words[0][1] if words[0][0] != "LMPOP" else unit[0][2]
        if ":inbox:" in key:
            return "worker's inbox pop"
        if key.startswith("spool:reply:"):
            return "producer's result pop"
        if key.endswith(":ready"):
            return "worker's token pop"
    if any(k.endswith((":idle", ":idle_until")) for _, k in words):
        return "claim or listing"
    return "other: " + "+".join(sorted(names))


class TurnRecord(PerfSession):
    """perf record of redis-server's appends to its AOF and its fsyncs. Under appendfsync
    always, each turn of Redis's event loop that wrote anything appends its writes in one
    write() and fsyncs once: the AOF's new bytes, cut at each write's length, are the turns, and
    what each turn wrote says which clients' calls cost it its fsync. turns() is None without
    perf, if perf did not answer, or if the writes do not account for the file's growth."""

    def __init__(self, pid, directory):
        self.out = os.path.join(directory, "turns.data")
        self.fd, self.path = aof_fd(pid)
        if self.fd is None:
            self.proc = None
            return
        super().__init__(directory, "turns",
                         ["record", "-q", "-e", "syscalls:sys_enter_write", "--filter",
                          f"fd == {self.fd}", "-e", "syscalls:sys_enter_fdatasync", "-e",
                          "syscalls:sys_enter_fsync", "-p", str(pid), "-o", self.out])

    def start(self):
        # The AOF's size when the recording starts is where its first turn begins: nothing else
        # writes meanwhile (the workers are idle between the warm-up and the run).
        self.begin = os.path.getsize(self.path) if self.path else 0
        super().start()

    def turns(self):
        """A list of turns, each the list of writers of its units, and the fsyncs counted."""
        if not self.finish():
            return None
        script = subprocess.run(["perf", "script", "-i", self.out, "-F", "event,trace"],
                                capture_output=True, text=True).stdout
        lengths, fsyncs = [], 0
        for line in script.splitlines():
            if "sys_enter_write" in line:
                lengths.append(int(re.search(r"count: (0x[0-9a-f]+)", line).group(1), 16))
            elif "sys_enter_f" in line:
                fsyncs += 1
        with open(self.path, "rb") as f:
            data = f.read()
        at, turns = self.begin, []
        if at + sum(lengths) > len(data):
            return None
        for length in lengths:
            units, open_unit = [], None
            try:
                commands = resp_commands(data[at:at + length])
            except ValueError:
                return None  # the recording did not start where a turn did
            for c in commands:
                word = c[0].upper()
                if word == "MULTI":
                    open_unit = []
                elif word == "EXEC":
                    units.append(open_unit)
                    open_unit = None
                elif open_unit is not None:
                    open_unit.append(c)
                elif word != "SELECT":
                    units.append([c])
            if open_unit is not None:  # a write cut inside a MULTI: the lengths are not turns
                return None
            turns.append([writer_of(u) for u in units])
            at += length
        return turns, fsyncs


def print_turns(recorded, jobs):
    if recorded is None:
        print("# fsync turns: n/a (no perf, or the AOF's writes could not be cut into turns)")
        return
    turns, fsyncs = recorded
    print(f"# fsync turns: {len(turns)} appends to the AOF, {fsyncs} fsyncs, "
          f"{len(turns) / jobs:.2f} turns per job; per job, the turns that wrote ...")
    kinds = collections.Counter(" + ".join(sorted(set(t))) for t in turns)
    for kind, n in kinds.most_common(12):
        print(f"  {n / jobs:5.2f}  {kind}")
    units = collections.Counter(w for t in turns for w in t)
    print("# per job: units written (a function's effects or one command), and turns in which"
          " that writer was the only one")
    alone = collections.Counter(t[0] for t in turns if len(set(t)) == 1)
    for writer, n in units.most_common():
        print(f"  {writer:<24} {n / jobs:5.2f} units  {alone[writer] / jobs:5.2f} turns alone")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ab_build = os.environ.get("AB_BUILD")  # set by bench/ab/ab.sh: the revision's build
    ap.add_argument("--spool-bin",
                    default=os.path.join(ab_build, "bench", "queue", "spool") if ab_build
                    else systems.default_spool_bin(),
                    help="where spool's worker and producer are (default $AB_BUILD/... under "
                         "bench/ab/ab.sh, else build/release/...)")
    ap.add_argument("--fsync", default="always", choices=("always", "everysec"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--turns", action="store_true",
                    help="also cut the run's AOF into the turns of Redis's event loop that "
                         "fsynced it, and say who wrote in each (appendfsync always, perf)")
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
        floors, floor_redis_us, floor_producer_us = [], [], []
        for i in range(3):
            argv = spool.producer(redis.url, f"floor{i}", a.jobs, mode="single") + ["--submit-only"]
            before = proc_cpu.tree_seconds([redis.pid])
            r, producer_cpu = processes.run_producer(spool, argv, work, f"floor{i}",
                                                     PRODUCER_LIMIT_S)
            floor_redis_us.append((proc_cpu.tree_seconds([redis.pid]) - before) * 1e6 / a.jobs)
            floor_producer_us.append(producer_cpu * 1e6 / a.jobs)
            rate = submissions_per_s(r)
            floors.append(rate)
            print(f"  {rate:.0f} submissions/s ({1e6 / rate:.1f} us each); CPU per submission: "
                  f"redis {floor_redis_us[-1]:.0f} us, the producer {floor_producer_us[-1]:.0f} us")

        workers = processes.Workers(spool, redis.url, "q", a.workers, 2, work, "profile")
        processes.run_producer(spool, spool.producer(redis.url, "q", 200, mode="single"), work,
                               "warmup", PRODUCER_LIMIT_S)
        redis.command("CONFIG", "RESETSTAT")
        fsync_count = FsyncCount(redis.pid, work)
        turn_record = TurnRecord(redis.pid, work) if a.turns else None
        fsync_count.start()
        if turn_record:
            turn_record.start()
        cpu_before = proc_cpu.tree_seconds([redis.pid])
        workers_before = proc_cpu.tree_seconds(workers.pids)
        r, producer_cpu = processes.run_producer(
            spool, spool.producer(redis.url, "q", a.jobs, mode="single"), work, "profile",
            PRODUCER_LIMIT_S)
        # CPU per job, µs: redis-server, the worker processes, the producer.
        redis_us = (proc_cpu.tree_seconds([redis.pid]) - cpu_before) * 1e6 / a.jobs
        workers_us = (proc_cpu.tree_seconds(workers.pids) - workers_before) * 1e6 / a.jobs
        producer_us = producer_cpu * 1e6 / a.jobs
        fsync_count.stop()
        if turn_record:
            turn_record.stop()
        fsyncs = fsync_count.count()
        workers.check_alive()

        print("# end to end, with the workers")
        print(f"  {a.jobs / r['done_s']:.0f} jobs/s")
        print(f"  redis CPU per job: {redis_us:.0f} us")
        print(f"  workers' CPU per job: {workers_us:.0f} us, the producer's: {producer_us:.0f} us")
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
        recorded = turn_record.turns() if turn_record else None
        if turn_record:
            print_turns(recorded, a.jobs)
        # One line for bench/ab/summary.py (NAME=VALUE columns).
        jobs_per_s = a.jobs / r["done_s"]
        fields = {"jobs_per_s": f"{jobs_per_s:.0f}",
                  "floor_per_s": f"{statistics.median(floors):.0f}",
                  "of_floor": f"{jobs_per_s / statistics.median(floors):.3f}",
                  "floor_redis_cpu_us": f"{statistics.median(floor_redis_us):.0f}",
                  "floor_producer_cpu_us": f"{statistics.median(floor_producer_us):.0f}",
                  "redis_cpu_us": f"{redis_us:.0f}",
                  "workers_cpu_us": f"{workers_us:.0f}",
                  "producer_cpu_us": f"{producer_us:.0f}"}
        if fsyncs is not None:
            fields["fsyncs_per_job"] = f"{fsyncs / a.jobs:.3f}"
        if recorded is not None:
            fields["turns_per_job"] = f"{len(recorded[0]) / a.jobs:.3f}"
        print("summary: " + " ".join(f"{k}={v}" for k, v in fields.items()))
    finally:
        if workers is not None:
            workers.stop()
        redis.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
