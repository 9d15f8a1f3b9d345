#!/usr/bin/env python3
"""The queue benchmark: spool's Redis queue against Celery, RQ and BullMQ on one redis-server.

    bench/queue/run.py [--systems spool,celery,rq,bullmq] [--repeats 3] [--jobs 1000] ...

Starts redis-server (Debian's) on a free loopback port with its append-only file in a
temporary directory, and for each `appendfsync` (always, then everysec), each count of worker
processes (1, 3; each with --concurrency 2) and each repeat, runs every system in turn
(interleaved): its workers, a warm-up, then the scenarios
  single  N jobs submitted one call at a time, to the last result seen,
  bulk    N jobs submitted in batches of --bulk with the system's bulk call, likewise,
  rate    --rate-jobs jobs at --rate jobs/s (open loop): submit->start, submit->result,
with the CPU time of the worker processes, of redis-server and of the producer, per job.
With spool and the single scenario, each repeat also measures the floor of single submissions
first: spool's producer alone, no worker running, submitting N jobs one call at a time
(`--submit-only`). A producer that waits for each acknowledgement gets at most that from this
Redis and this disk (one fsync per submission under always), whatever the workers cost, so the
table says how far above each peer's single rate the floor itself lies.
Then the Redis ceiling of each system (harness/ceiling.py). Prints one table per pass, with
median, min and max over the repeats and each peer's ratio to spool from this run.
Standard library only; the drivers bring their systems (bench/queue/setup.sh installs them,
and is run here when a peer is missing, unless --no-setup).
"""

import argparse
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))  # wire.py: the Redis client
from harness import ceiling, processes, proc_cpu, redis_server, report, systems  # noqa: E402

SCENARIOS = ("single", "bulk", "rate")


def options():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 2)[2])
    csv = lambda t: [x for x in t.split(",") if x]  # noqa: E731
    ints = lambda t: [int(x) for x in csv(t)]  # noqa: E731
    p.add_argument("--systems", type=csv, default=["spool", "celery", "rq", "bullmq"])
    p.add_argument("--fsync", type=csv, default=["always", "everysec"],
                   help="appendfsync of each pass (default always,everysec)")
    p.add_argument("--workers", type=ints, default=[1, 3], help="worker processes (default 1,3)")
    p.add_argument("--concurrency", type=int, default=2, help="handlers per worker (default 2)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--jobs", type=int, default=1000, help="jobs of single and bulk (1000)")
    p.add_argument("--bulk", type=int, default=100, help="jobs per bulk call (100)")
    p.add_argument("--rate", type=float, default=500.0, help="jobs/s of the rate scenario (500)")
    p.add_argument("--rate-jobs", type=int, default=1000, help="jobs of the rate scenario (1000)")
    p.add_argument("--warmup", type=int, default=200, help="unmeasured jobs before each system's"
                   " scenarios, after its workers start (200)")
    p.add_argument("--scenarios", type=csv, default=list(SCENARIOS))
    p.add_argument("--capture-jobs", type=int, default=1000,
                   help="jobs run under MONITOR to list a system's commands, and replayed for "
                   "its ceiling when its producer has no --print-commands (1000)")
    p.add_argument("--ceiling-jobs", type=int, default=20000,
                   help="jobs replayed from a --print-commands template (20000)")
    p.add_argument("--ceiling-connections", type=int, default=8,
                   help="connections a --print-commands replay is dealt over (8)")
    p.add_argument("--no-ceiling", action="store_true")
    p.add_argument("--spool-bin", default=systems.default_spool_bin(),
                   help="directory of spool's driver executables `worker` and `producer` "
                   "(default build/release/bench/queue/spool; under bench/ab/ab.sh, "
                   "$AB_BUILD/bench/queue/spool)")
    p.add_argument("--spool-worker", help="spool's worker executable (default SPOOL_BIN/worker)")
    p.add_argument("--spool-producer",
                   help="spool's producer executable (default SPOOL_BIN/producer)")
    p.add_argument("--env-dir", default=systems.default_env_dir(),
                   help="where setup.sh installed the peers (default build/bench-queue)")
    p.add_argument("--no-setup", action="store_true",
                   help="do not run setup.sh when a peer's environment is missing")
    p.add_argument("--redis-dir", help="parent of redis-server's temporary directory (default "
                   "ENV_DIR: on the repository's disk, since fsync on tmpfs costs nothing)")
    p.add_argument("--producer-limit", type=float, default=600.0,
                   help="seconds a producer may run before it counts as failed (600)")
    p.add_argument("--json", help="write every sample to this file")
    p.add_argument("--keep-logs", action="store_true",
                   help="keep the drivers' output and redis.log (printed where)")
    a = p.parse_args()
    unknown = set(a.systems) - {"spool", "spool-claimed", "celery", "rq", "bullmq"}
    if unknown or set(a.scenarios) - set(SCENARIOS) or set(a.fsync) - {"always", "everysec", "no"}:
        p.error(f"unknown system, scenario or fsync: {a.systems} {a.scenarios} {a.fsync}")
    if min([a.repeats, a.jobs, a.bulk, a.rate_jobs, a.concurrency, *a.workers]) < 1 or a.rate <= 0:
        p.error("counts and rates must be positive")
    return a


def selected_systems(a):
    spool = systems.spool(a.spool_worker or os.path.join(a.spool_bin, "worker"),
                          a.spool_producer or os.path.join(a.spool_bin, "producer"))
    found = {s.name: s for s in spool + systems.peers(a.env_dir)}
    return [found[n] for n in a.systems]


def ensure_peers(a, chosen):
    if a.no_setup or not any(s.missing for s in chosen if not s.name.startswith("spool")):
        return chosen
    print("setup: installing the peers (bench/queue/setup.sh)", file=sys.stderr, flush=True)
    subprocess.run([os.path.join(HERE, "setup.sh"), a.env_dir], check=True)
    return selected_systems(a)


def peer_versions(a):
    out = []
    python = os.path.join(a.env_dir, "venv", "bin", "python")
    if os.path.exists(python):
        r = subprocess.run([python, "-c", "import importlib.metadata as m; print(' '.join("
                            "f'{p} {m.version(p)}' for p in ('celery','kombu','rq','redis',"
                            "'hiredis')))"], capture_output=True, text=True)
        out.append(r.stdout.strip())
    pkg = os.path.join(a.env_dir, "node", "node_modules", "{}", "package.json")
    for name in ("bullmq", "ioredis"):
        if os.path.exists(pkg.format(name)):
            with open(pkg.format(name)) as f:
                out.append(f"{name} {json.load(f)['version']}")
    node = shutil.which("node")
    if node:
        out.append("node " + subprocess.run([node, "--version"], capture_output=True,
                                            text=True).stdout.strip())
    return ", ".join(x for x in out if x)


class Run:
    """One run: its redis-server, its directory for logs, its results."""

    def __init__(self, a, chosen, redis, log_dir):
        self.a, self.systems, self.redis, self.log_dir = a, chosen, redis, log_dir
        self.results = report.Results()
        self.counter = 0

    def runnable(self):
        return [s for s in self.systems if not s.missing]

    def tag(self, system):
        self.counter += 1
        return f"{self.counter:04d}-{system.name}"

    def group(self, system, fsync, workers, repeat):
        """Workers of one system up, a warm-up, then each scenario; one sample each."""
        a, r = self.a, self.redis
        tag = self.tag(system)
        queue = f"bench-{tag}"
        r.flush()
        try:
            w = processes.Workers(system, r.url, queue, workers, a.concurrency, self.log_dir, tag)
        except processes.CommandFailed as e:
            for sc in a.scenarios:
                self.results.fail((fsync, workers, sc, system.name), str(e))
            return
        sc = "warm-up"
        try:
            if a.warmup:
                processes.run_producer(system, system.producer(r.url, queue, a.warmup, "bulk",
                                                               a.bulk),
                                       self.log_dir, tag + "-warmup", a.producer_limit)
            for sc in a.scenarios:
                key = (fsync, workers, sc, system.name)
                jobs = a.rate_jobs if sc == "rate" else a.jobs
                argv = (system.producer(r.url, queue, jobs, rate=a.rate) if sc == "rate"
                        else system.producer(r.url, queue, jobs, sc, a.bulk))
                r.command("CONFIG", "RESETSTAT")
                w0, r0 = proc_cpu.tree_seconds(w.pids), proc_cpu.tree_seconds([r.pid])
                out, producer_cpu = processes.run_producer(system, argv, self.log_dir,
                                                           f"{tag}-{sc}", a.producer_limit)
                w1, r1 = proc_cpu.tree_seconds(w.pids), proc_cpu.tree_seconds([r.pid])
                w.check_alive()
                s = report.sample_of(sc, out, jobs, w1 - w0, r1 - r0, producer_cpu,
                                     r.command_seconds())
                self.results.add(key, s)
                progress(f"{fsync} {workers}x{a.concurrency} #{repeat + 1} {sc:6} "
                         f"{system.name:7} " + " ".join(f"{k}={report.fmt(v)}"
                                                        for k, v in s.items()))
        except processes.CommandFailed as e:
            self.results.fail((fsync, workers, sc, system.name), str(e))
            progress(f"{fsync} {workers}x{a.concurrency} #{repeat + 1} {sc} {system.name}: "
                     f"FAILED {e}")
        finally:
            w.stop()

    def floor(self, fsync, workers, repeat):
        """spool's producer alone (no worker): --jobs submissions one call at a time."""
        a, r = self.a, self.redis
        spool = next((s for s in self.runnable() if s.name == "spool"), None)
        if spool is None or "single" not in a.scenarios:
            return
        tag = self.tag(spool) + "-floor"
        r.flush()
        key = (fsync, workers, "floor", "spool")
        try:
            out, _ = processes.run_producer(
                spool, spool.producer(r.url, f"bench-{tag}", a.jobs, "single") + ["--submit-only"],
                self.log_dir, tag, a.producer_limit)
        except processes.CommandFailed as e:
            self.results.fail(key, str(e))
            return
        rate = a.jobs / out["submit_s"]
        self.results.add(key, {"submit_per_s": rate})
        progress(f"{fsync} {workers}x{a.concurrency} #{repeat + 1} floor  spool   "
                 f"submit_per_s={report.fmt(rate)}")

    def capture_commands(self, system, fsync):
        """MONITOR during --capture-jobs jobs: the system's commands per job. Under appendfsync
        everysec whatever the pass: the commands are the same, and RQ's take minutes with
        always."""
        a, r = self.a, self.redis
        tag = self.tag(system) + "-capture"
        queue = f"bench-{tag}"
        r.flush()
        r.set_fsync("everysec")
        w = processes.Workers(system, r.url, queue, 1, a.concurrency, self.log_dir, tag)
        try:
            processes.run_producer(system, system.producer(r.url, queue, a.warmup or 1, "bulk",
                                                           a.bulk),
                                   self.log_dir, tag + "-warmup", a.producer_limit)
            cap = ceiling.Capture(r.port, exclude=[r.conn.local_address])
            try:
                processes.run_producer(system, system.producer(r.url, queue, a.capture_jobs,
                                                               "single"),
                                       self.log_dir, tag, a.producer_limit)
            finally:
                commands = cap.stop()
        finally:
            w.stop()
            r.set_fsync(fsync)
        self.results.commands[system.name] = ceiling.summary(commands, a.capture_jobs)
        return commands

    def ceiling(self, system, fsync, captured):
        a, r = self.a, self.redis
        queue = f"bench-ceiling-{system.name}"
        template = ceiling.print_commands(system, r.url, queue)
        if template:
            setup, streams = ceiling.template_replay(template, queue, a.ceiling_jobs,
                                                     a.ceiling_connections)
            jobs = a.ceiling_jobs
            source = f"its --print-commands, {len(streams)} connections"
        else:
            setup, streams = [], ceiling.capture_replay(captured)
            jobs = a.capture_jobs
            source = f"MONITOR of {jobs} jobs, replayed on its {len(streams)} connections"
        r.flush()
        rate, replies, errors, first = ceiling.replay(shutil.which("redis-cli"), r.port, setup,
                                                     streams, jobs)
        self.results.ceilings[(fsync, system.name)] = {
            "jobs_per_s": rate, "source": source, "replies": replies, "errors": errors,
            "first_errors": first}


def progress(line):
    print(time.strftime("%H:%M:%S ") + line, file=sys.stderr, flush=True)


def main():
    a = options()
    chosen = ensure_peers(a, selected_systems(a))
    redis_server.binary_path("redis-cli")
    parent = a.redis_dir or a.env_dir
    os.makedirs(parent, exist_ok=True)
    work = tempfile.mkdtemp(prefix="queue-bench-", dir=parent)
    # A SIGTERM ends the run like ^C: through the finally below, which stops every process.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    redis = None
    ok = False
    try:
        redis = redis_server.RedisServer(work, redis_server.binary_path("redis-server"))
        run = Run(a, chosen, redis, work)
        unavailable = {s.name: s.missing for s in chosen if s.missing}
        load = os.getloadavg()
        fsync = redis_server.fsync_ms(work)
        header = [
            f"# bench/queue/run.py, {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
            "# command: " + shlex.join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            f"# CPU: {report.cpu_model()}, {os.cpu_count()} CPUs; load average at start "
            f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}",
            f"# redis-server {redis.version} on 127.0.0.1:{redis.port}, AOF on "
            f"{redis_server.filesystem_of(work)} (append+fsync there: p50 {fsync[0]:.2f} ms, "
            f"p99 {fsync[1]:.2f} ms), no RDB, no auto-rewrite",
            f"# peers: {peer_versions(a)}",
            f"# jobs: single/bulk {a.jobs} (bulk {a.bulk}), rate {a.rate_jobs} at {a.rate:g}/s,"
            f" warm-up {a.warmup}; {a.repeats} repeats, interleaved",
        ] + [f"# {name}: {why}" for name, why in unavailable.items()]
        print("\n".join(header), flush=True)
        live = run.runnable()
        captured = {}
        for fsync in a.fsync:
            redis.set_fsync(fsync)
            for workers in a.workers:
                for repeat in range(a.repeats):
                    run.floor(fsync, workers, repeat)
                    for system in live:
                        run.group(system, fsync, workers, repeat)
                print("\n" + report.table(run.results, fsync, workers, a.concurrency,
                                          [s.name for s in chosen], a.scenarios, unavailable),
                      flush=True)
            if a.no_ceiling:
                continue
            for system in live:
                try:
                    if system.name not in captured:
                        captured[system.name] = run.capture_commands(system, fsync)
                    run.ceiling(system, fsync, captured[system.name])
                except (processes.CommandFailed, RuntimeError, OSError) as e:
                    run.results.ceilings[(fsync, system.name)] = {"error": f"failed: {e}"}
            if fsync == a.fsync[0]:
                print("\n" + report.commands_table(run.results, [s.name for s in live]))
            print("\n" + report.ceiling_table(run.results, fsync, [s.name for s in live]),
                  flush=True)
            for name, why in unavailable.items():
                print(f"{name}: {why}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump(run.results.as_json(), f, indent=1)
        ok = not run.results.failures
    except RuntimeError as e:
        print(f"run.py: {e}", file=sys.stderr)
    finally:
        if redis:
            redis.stop()
        if a.keep_logs or not ok:
            print(f"# logs: {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
