#!/usr/bin/env python3
"""The queue under faults. In a private network of namespaces (cluster/netns.py): a Redis
primary and replica with three Sentinels (cluster/fleet.py's store), three `spool-queue worker`
processes running the record task and a mix of sleep jobs, and two producers
(tools/fault_producer.cpp) submitting 20,000 jobs with unique keys, some delayed, some with a
failing first attempt, each acknowledged only once a replica has it. Meanwhile, one after
another: kill -9 of a worker with jobs in flight; SIGSTOP of a worker for longer than the lease,
then SIGCONT; kill -9 of the Redis primary (Sentinel fails over); SIGTERM of every worker in
turn (each drains and is restarted); a worker cut off from Redis (its link down for longer than
the lease, then back). Some jobs are cancelled, queued and running.

Then it checks, printing the jobs concerned when a check fails:
  - every acknowledged job has exactly one recorded outcome (and every job not cancelled is
    done);
  - every record job's payload is in the record file at least once, and the attempt whose
    outcome was recorded is one of the attempts the file shows for it;
  - no cancelled job ran after it was cancelled;
and prints, for each fault, the time until every job the worker held was running elsewhere (a
figure, not asserted: speed is the benchmarks' business)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import fleet  # noqa: E402
import netns  # noqa: E402
import wire  # noqa: E402

import redis  # noqa: E402  (python3-redis)

QUEUE_BIN = os.environ.get("SPOOL_QUEUE", "")
PRODUCER_BIN = os.environ.get("SPOOL_QUEUE_PRODUCER", "")
QUEUE = "faults"
JOBS = 20000
PRODUCERS = 2
RATE = 220  # jobs per second per producer: the submissions span the faults
LEASE_S = 3.0
CHECK_S = 0.5
THREADS = 4
FINAL = ("done", "dead", "cancelled")

failures = []
figures = []


def check(cond, what, detail=None):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + str(detail)[:3000], flush=True)


def note(what):
    print(f"---- {time.strftime('%T')} {what}", flush=True)


def wait_for(pred, timeout, what, interval=0.05):
    """Polls pred() until true; an exception of pred's ends the wait, the deadline raises
    fleet.FleetError."""
    return wire.wait_for(pred, timeout, what, interval, errors=(), failure=fleet.FleetError)


class Cluster:
    """The lab, the store, the workers and the producers, and the test's view of Redis."""

    def __init__(self, lab, state):
        self.lab = lab
        self.state = state
        self.record = os.path.join(state, "record.txt")
        self.redis_hosts = {name: lab.add_host(name) for name in ("redis1", "redis2")}
        sentinel_hosts = [lab.add_host(f"sentinel{i}") for i in (1, 2, 3)]
        self.worker_hosts = [lab.add_host(f"w{i}") for i in (1, 2, 3)]
        self.client = lab.add_host("client")
        lab.check_isolated()
        e = fleet.Endpoint
        layout = fleet.Layout(
            haproxy=e("haproxy", self.client.addr, 8080), stats=e("stats", self.client.addr, 8404),
            nodes=[], redis=[e(n, h.addr, 6379) for n, h in self.redis_hosts.items()],
            sentinels=[e(f"sentinel{i + 1}", h.addr, 26379) for i, h in enumerate(sentinel_hosts)])
        self.fleet = fleet.Fleet(os.path.join(state, "store"), layout, spoold="/bin/true",
                                 settings=fleet.Settings(down_after_ms=2000,
                                                         failover_timeout_ms=10000))
        self.fleet.prepare()
        # A process starts in the network namespace of the thread that starts it.
        for name, host in self.redis_hosts.items():
            lab.enter(host)
            self.fleet.store.start_redis(name)
        self.fleet.store.wait_replica_online("redis2")
        for s, host in zip(layout.sentinels, sentinel_hosts):
            lab.enter(host)
            self.fleet.store.start_sentinel(s.name)
        lab.enter(self.client)
        self.fleet.store.wait_sentinels_agree()
        self.url = self.fleet.store.spec()
        self.workers = [None, None, None]  # (name, Popen) per worker host
        self.producers = []
        self.acked = {}  # job index -> id
        self.acked_lock = threading.Lock()

    # -- Redis, as the test sees it --

    def primary(self):
        name = wait_for(self.fleet.store.primary, 60, "the Sentinels to name a primary")
        host = self.redis_hosts[name]
        return redis.Redis(host=host.addr, port=6379, socket_timeout=5)

    def call(self, fn):
        """fn(redis client) on the primary, retried through a failover."""
        end = time.monotonic() + 60
        while True:
            try:
                return fn(self.primary())
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                    redis.exceptions.ReadOnlyError, fleet.FleetError):
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)

    def cli(self, *args):
        r = subprocess.run([QUEUE_BIN, "--store", self.url, "--replicas", "1", *args],
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout, r.stderr

    def held_by(self, consumer):
        """The job numbers Redis says the consumer holds (pending entries)."""
        def look(r):
            jobs = []
            for level in ("high", "normal", "low"):
                stream = f"spool:{{{QUEUE}}}:{level}"
                try:
                    pending = r.xpending_range(stream, "workers", "-", "+", 10000, consumer)
                except redis.exceptions.ResponseError:
                    continue
                for p in pending:
                    entry = r.xrange(stream, p["message_id"], p["message_id"])
                    if entry and b"job" in entry[0][1]:
                        jobs.append(entry[0][1][b"job"].decode())
            return jobs
        return self.call(look)

    def job_fields(self, numbers, *fields):
        """{job number: [field values]} for the queue's jobs, read in pipelined batches."""
        out = {}
        for i in range(0, len(numbers), 2000):
            part = numbers[i:i + 2000]

            def look(r, part=part):
                pipe = r.pipeline(transaction=False)
                for n in part:
                    pipe.hmget(f"spool:{{{QUEUE}}}:job:{n}", *fields)
                return pipe.execute()
            for n, values in zip(part, self.call(look)):
                out[n] = [v.decode() if v is not None else None for v in values]
        return out

    def stats(self):
        rc, out, err = self.cli("stats", QUEUE)
        return json.loads(out) if rc == 0 else None

    # -- workers --

    def start_worker(self, i):
        self.lab.enter(self.worker_hosts[i])
        log = open(os.path.join(self.state, f"w{i + 1}.log"), "ab")
        p = subprocess.Popen(
            [QUEUE_BIN, "--store", self.url, "worker", "--queue", QUEUE, "--threads",
             str(THREADS), "--lease", f"{LEASE_S}s", "--check-interval", f"{CHECK_S}s",
             "--drain-timeout", "5s", "--record-file", self.record],
            stdout=subprocess.PIPE, stderr=log, text=True)
        self.lab.enter(self.client)
        line = p.stdout.readline()
        if not line.startswith("ready "):
            p.kill()
            raise fleet.FleetError(f"worker w{i + 1} did not start: {line!r}")
        self.workers[i] = (line.split()[1], p)
        return self.workers[i][0]

    def wait_holding(self, i, timeout=60):
        """Waits until worker i holds a sleep job (which lasts long enough for the fault to
        find it in flight)."""
        name = self.workers[i][0]

        def holding_a_sleep():
            held = self.held_by(name)
            tasks = self.job_fields(held, "task") if held else {}
            return any(v[0] == "sleep" for v in tasks.values())
        return wait_for(holding_a_sleep, timeout, f"w{i + 1} to hold a sleep job", 0.05)

    # -- producers --

    def start_producers(self):
        per = JOBS // PRODUCERS
        for k in range(PRODUCERS):
            log = open(os.path.join(self.state, f"producer{k + 1}.log"), "ab")
            p = subprocess.Popen([PRODUCER_BIN, self.url, QUEUE, str(k * per), str(per), str(RATE),
                                  "1"], stdout=subprocess.PIPE, stderr=log, text=True)
            t = threading.Thread(target=self._read_acks, args=(p,), daemon=True)
            t.start()
            self.producers.append((p, t))

    def _read_acks(self, p):
        for line in p.stdout:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ACK":
                with self.acked_lock:
                    self.acked[int(parts[1])] = parts[2]

    def stop_everything(self):
        for entry in self.workers:
            if entry and entry[1].poll() is None:
                entry[1].send_signal(signal.SIGCONT)
                entry[1].kill()
                entry[1].wait()
        for p, _ in self.producers:
            if p.poll() is None:
                p.kill()
                p.wait()
        self.fleet.stop()


def moved_time(c, consumer, jobs, since, timeout=120):
    """Seconds from `since` until every one of `jobs` runs under another consumer (or ended)."""
    if not jobs:
        return 0.0

    def moved():
        def look(r):
            pipe = r.pipeline(transaction=False)
            for n in jobs:
                pipe.hmget(f"spool:{{{QUEUE}}}:job:{n}", "state", "owner")
            return pipe.execute()
        for state, owner in c.call(look):
            state = state.decode() if state else None
            owner = owner.decode() if owner else ""
            if state in FINAL:
                continue
            if state == "running" and owner != consumer:
                continue
            return False
        return True
    wait_for(moved, timeout, f"the jobs of {consumer} to run elsewhere", 0.05)
    return time.monotonic() - since


def number_of(job_id):
    return job_id.rsplit("/", 1)[1]


def run(c):
    for i in range(3):
        c.start_worker(i)
    note(f"3 workers of {THREADS} threads, lease {LEASE_S} s, check every {CHECK_S} s")

    # Jobs to cancel: delayed ones (they must never start) and long sleeps (cancelled running).
    to_cancel_queued, to_cancel_running = [], []
    for i in range(30):
        rc, out, err = c.cli("submit", QUEUE, "record", f"c{i}", "--delay", "20s",
                             "--key", f"cancel-q-{i}")
        check(rc == 0, f"submit the delayed job c{i} (to cancel)", err)
        to_cancel_queued.append(out.strip())
    for i in range(4):
        rc, out, err = c.cli("submit", QUEUE, "sleep", "8000", "--key", f"cancel-r-{i}",
                             "--takeovers", "20")
        to_cancel_running.append(out.strip())

    c.start_producers()
    note(f"{PRODUCERS} producers submitting {JOBS} jobs at {RATE} jobs/s each")

    cancelled_at = {}
    for job in to_cancel_queued:
        rc, out, err = c.cli("cancel", job)
        check(rc == 0 and "it was delayed" in out, f"cancel {job} while it waits", (out, err))
        cancelled_at[job] = c.job_fields([number_of(job)], "attempt")[number_of(job)][0]
    running_numbers = [number_of(j) for j in to_cancel_running]
    wait_for(lambda: all(v[0] == "running" for v in
                         c.job_fields(running_numbers, "state").values()), 60,
             "the long sleep jobs to run")
    for job in to_cancel_running:
        rc, out, err = c.cli("cancel", job)
        check(rc == 0 and "it was running" in out, f"cancel {job} while it runs", (out, err))
        cancelled_at[job] = c.job_fields([number_of(job)], "attempt")[number_of(job)][0]

    # 1. kill -9 of a worker with jobs in flight (what it holds is read after the kill).
    c.wait_holding(0)
    name, p = c.workers[0]
    p.kill()
    t0 = time.monotonic()
    p.wait()
    held = c.held_by(name)
    dt = moved_time(c, name, held, t0)
    figures.append(("kill -9 of a worker", len(held), dt))
    note(f"kill -9 of w1 ({name}) holding {len(held)} jobs: all running elsewhere after {dt:.2f} s")
    c.start_worker(0)

    # 2. SIGSTOP for longer than the lease, then SIGCONT.
    c.wait_holding(1)
    name, p = c.workers[1]
    p.send_signal(signal.SIGSTOP)
    t0 = time.monotonic()
    held = c.held_by(name)
    dt = moved_time(c, name, held, t0)
    figures.append(("SIGSTOP of a worker", len(held), dt))
    note(f"SIGSTOP of w2 ({name}) holding {len(held)} jobs: all running elsewhere after {dt:.2f} s")
    time.sleep(max(0.0, LEASE_S + 2 - (time.monotonic() - t0)))  # stopped longer than a lease
    p.send_signal(signal.SIGCONT)
    note("SIGCONT of w2: it wakes up holding stale attempts")

    # 3. kill -9 of the Redis primary.
    done_before = c.stats()["done"]
    old = c.fleet.store.primary()
    c.fleet.store.kill_redis(old)
    t0 = time.monotonic()
    new = c.fleet.store.wait_for_new_primary(old, timeout=90)
    dt = time.monotonic() - t0
    figures.append(("kill -9 of the Redis primary: a new primary", 0, dt))
    note(f"kill -9 of the primary {old}: {new} promoted after {dt:.2f} s")
    done_then = (c.stats() or {}).get("done", 0)
    wait_for(lambda: (c.stats() or {}).get("done", 0) > max(done_before, done_then), 120,
             "workers to record outcomes on the new primary")
    dt = time.monotonic() - t0
    figures.append(("kill -9 of the Redis primary: outcomes recorded again", 0, dt))
    note(f"outcomes recorded on {new} {dt:.2f} s after the kill")
    c.lab.enter(c.redis_hosts[old])
    c.fleet.store.start_redis(old)
    c.lab.enter(c.client)
    c.fleet.store.wait_replica_online(old, timeout=120)
    note(f"{old} back as a replica (submissions, which wait for a replica, go on)")

    # 4. SIGTERM of every worker in turn: each drains, exits 0, and is started again.
    for i in range(3):
        c.wait_holding(i)
        name, p = c.workers[i]
        held = c.held_by(name)
        p.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            rc = p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = None
        exited = time.monotonic() - t0
        check(rc == 0, f"w{i + 1} drains on SIGTERM and exits 0", rc)
        dt = moved_time(c, name, held, t0)
        left = c.held_by(name)
        check(not left, f"w{i + 1} holds nothing after its drain", left)
        figures.append((f"SIGTERM of w{i + 1} (exited after {exited:.2f} s)", len(held), dt))
        note(f"SIGTERM of w{i + 1} ({name}) holding {len(held)} jobs: exited after "
             f"{exited:.2f} s, all finished or running elsewhere after {dt:.2f} s")
        c.start_worker(i)

    # 5. A worker cut off from Redis for longer than the lease.
    c.wait_holding(2)
    name, p = c.workers[2]
    c.lab.cut(c.worker_hosts[2])
    t0 = time.monotonic()
    held = c.held_by(name)
    dt = moved_time(c, name, held, t0)
    figures.append(("a worker cut off from Redis", len(held), dt))
    note(f"w3 ({name}) cut off holding {len(held)} jobs: all running elsewhere after {dt:.2f} s")
    time.sleep(max(0.0, LEASE_S + 2 - (time.monotonic() - t0)))  # cut off longer than a lease
    c.lab.restore(c.worker_hosts[2])
    note("w3's link restored")

    # The rest of the work.
    for p, t in c.producers:
        p.wait(timeout=240)
        t.join(timeout=30)
    check(all(p.returncode == 0 for p, _ in c.producers), "the producers finished")
    note(f"{len(c.acked)} jobs acknowledged; waiting for every one to end")

    def settled():
        s = c.stats()
        return s and s["queued"] == 0 and s["running"] == 0 and s["delayed"] == 0
    wait_for(settled, 240, "every job to end", 0.5)
    for i in range(3):
        name, p = c.workers[i]
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    return to_cancel_queued, to_cancel_running, cancelled_at


def verify(c, to_cancel_queued, to_cancel_running, cancelled_at):
    acked = dict(c.acked)
    check(len(acked) == JOBS, f"every one of the {JOBS} jobs was acknowledged",
          sorted(set(range(JOBS)) - set(acked))[:50])
    ids = {i: acked[i] for i in acked}
    numbers = [number_of(ids[i]) for i in sorted(ids)]
    fields = c.job_fields(numbers, "state", "outcomes", "outcome_attempt", "error", "payload",
                          "task", "attempt", "takeovers")
    by_state = {}
    for n, f in fields.items():
        by_state.setdefault(f[0], []).append(n)
    not_one = [(n, f[1]) for n, f in fields.items() if f[1] != "1"]
    check(not not_one, "every acknowledged job has exactly one recorded outcome", not_one[:50])
    not_done = [(n, f[0], f[3]) for n, f in fields.items() if f[0] != "done"]
    check(not not_done, "every acknowledged job is done", not_done[:50])

    # The record file: "PAYLOAD ATTEMPT" per run of a record job.
    runs = {}
    with open(c.record) as f:
        lines = f.read().splitlines()
    for line in lines:
        payload, attempt = line.rsplit(" ", 1)
        runs.setdefault(payload, []).append(attempt)
    missing, unrecorded = [], []
    for n, f in fields.items():
        if f[5] != "record":
            continue
        attempts = runs.get(f[4])
        if not attempts:
            missing.append((n, f[4]))
        elif f[2] not in attempts:
            unrecorded.append((n, f[4], f[2], attempts))
    check(not missing, "every record job's payload is in the record file", missing[:50])
    check(not unrecorded, "the attempt whose outcome was recorded ran (one per job)",
          unrecorded[:50])

    # Cancelled jobs: never ran after the cancel.
    cancelled_numbers = [number_of(j) for j in to_cancel_queued + to_cancel_running]
    cf = c.job_fields(cancelled_numbers, "state", "outcomes", "attempt")
    wrong = [(n, v) for n, v in cf.items() if v[0] != "cancelled" or v[1] != "1"]
    check(not wrong, "every cancelled job ended cancelled, with one recorded outcome", wrong)
    ran = [f"c{i}" for i in range(len(to_cancel_queued)) if f"c{i}" in runs]
    check(not ran, "no job cancelled while waiting ever ran", ran)
    later = [(j, cancelled_at[j], cf[number_of(j)][2]) for j in to_cancel_queued + to_cancel_running
             if cf[number_of(j)][2] != cancelled_at[j]]
    check(not later, "no cancelled job started an attempt after its cancel", later)

    reruns = sum(1 for a in runs.values() if len(a) > 1)
    print(f"\nfigures ({len(lines)} record lines, {reruns} record jobs ran more than once, "
          f"jobs by state: { {k: len(v) for k, v in by_state.items()} }):")
    for what, held, dt in figures:
        print(f"  {what:58} {'holding ' + str(held) + ' jobs' if held else '':18} {dt:6.2f} s")
    print(f"  (lease {LEASE_S} s, check interval {CHECK_S} s)")
    s = c.stats()
    print(f"  queue: submitted {s['submitted']}, done {s['done']}, "
          f"failed {s['failed']}, retried {s['retried']}, takeovers {s['takeovers']}, "
          f"handed back {s['handed_back']}, cancelled {s['cancelled']}, dead {s['died']}")


def main():
    for name, path in (("SPOOL_QUEUE", QUEUE_BIN), ("SPOOL_QUEUE_PRODUCER", PRODUCER_BIN)):
        if not path or not os.access(path, os.X_OK):
            print(f"{name} must name the binary", file=sys.stderr)
            return 2
    if os.geteuid() != 0:
        print("the fault test needs root (network namespaces)", file=sys.stderr)
        return 2
    state = tempfile.mkdtemp(prefix="spool-queue-faults-")
    started = time.monotonic()
    try:
        with netns.Lab("qfaults") as lab:
            c = Cluster(lab, state)
            try:
                cancelled = run(c)
                verify(c, *cancelled)
            finally:
                c.stop_everything()
    except fleet.FleetError as e:
        check(False, f"the test ran to its end: {e}")
        print(f"logs kept in {state}")
        return 1
    print(f"\n{time.monotonic() - started:.0f} s in all")
    if failures:
        print(f"{len(failures)} check(s) failed; logs kept in {state}")
        return 1
    shutil.rmtree(state, ignore_errors=True)
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
