"""The driver contract's command lines and reports, shared by the Python drivers (celery/, rq/).

Worker:   --redis URL --queue Q --concurrency C; prints `ready` once it consumes.
Producer: --redis URL --queue Q --jobs N (--mode single|bulk [--bulk B] | --rate R)
          [--timeout S]; prints one JSON line (the fields are README.md's), exits 1 with a
          message on stderr when a job failed or a result did not arrive within S seconds of
          the last submit.

Each job's payload is its submit time (time.time_ns(), CLOCK_REALTIME); each handler returns
the CLOCK_REALTIME ns at which it started, as a decimal string.
"""

import argparse
import itertools
import json
import os
import queue
import sys
import threading
import time

# At --rate, jobs are handed to this many submitting threads, so that a submit waiting for
# Redis (an fsync under appendfsync always) does not hold back the next scheduled one.
SUBMITTERS = 16


def worker_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--redis", required=True, help="redis://HOST:PORT/DB")
    p.add_argument("--queue", required=True)
    p.add_argument("--concurrency", type=int, required=True)
    a = p.parse_args()
    if a.concurrency < 1:
        p.error("--concurrency must be at least 1")
    return a


def producer_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--redis", required=True, help="redis://HOST:PORT/DB")
    p.add_argument("--queue", required=True)
    p.add_argument("--jobs", type=int, required=True)
    p.add_argument("--mode", choices=("single", "bulk"))
    p.add_argument("--bulk", type=int, default=100, help="jobs per batch in --mode bulk")
    p.add_argument("--rate", type=float, help="jobs per second, open loop")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds to wait for the results after the last submit")
    a = p.parse_args()
    if (a.mode is None) == (a.rate is None):
        p.error("give exactly one of --mode and --rate")
    if a.jobs < 1 or a.bulk < 1 or (a.rate is not None and a.rate <= 0):
        p.error("--jobs, --bulk and --rate must be positive")
    return a


def announce_ready():
    """`ready` straight to fd 1: the systems' loggers may have taken sys.stdout over."""
    os.write(1, b"ready\n")


def fail(message):
    print(f"producer: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


class Outcomes:
    """Submit times, handler start times and result-seen times of one producer run.

    Results may arrive (from a collector thread) before the submitting thread has recorded the
    job's id, so both sides are kept apart and matched when the run is judged.
    """

    def __init__(self):
        self._lock = threading.Condition()
        self.submit_ns = {}   # job id -> wall ns just before its submit call
        self.started = {}     # job id -> (ok, handler start ns or error text, seen wall ns)
        self._pending = {}    # submitted, no result yet, in submit order (a dict keeps it)
        self._matched = 0

    def submitted(self, job_id, submit_ns):
        with self._lock:
            self.submit_ns[job_id] = submit_ns
            if job_id in self.started:
                self._matched += 1
                self._lock.notify_all()
            else:
                self._pending[job_id] = None

    def seen(self, job_id, ok, value, seen_ns=None):
        seen_ns = seen_ns or time.time_ns()
        with self._lock:
            if job_id in self.started:
                return
            self.started[job_id] = (ok, value, seen_ns)
            if job_id in self.submit_ns:
                self._pending.pop(job_id, None)
                self._matched += 1
                self._lock.notify_all()

    def oldest_pending(self, count):
        """The first `count` submitted jobs whose result has not been seen."""
        with self._lock:
            return list(itertools.islice(self._pending, count))

    def wait_all(self, jobs, timeout_s):
        """Until every one of `jobs` submitted jobs has its result; fails after timeout_s."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while self._matched < jobs:
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = list(self._pending)
                    fail(f"{len(missing)} of {jobs} results missing after {timeout_s:g} s, "
                         f"e.g. {missing[:5]}")
                self._lock.wait(min(left, 1.0))
        self.check_failures()

    def check_failures(self):
        failed = [(j, v) for j, (ok, v, _) in self.started.items() if not ok]
        if failed:
            fail(f"{len(failed)} jobs failed, e.g. {failed[:3]}")

    def last_seen_ns(self):
        return max(seen for _, _, seen in self.started.values())


def parse_start_ns(value):
    """The handler's result: its start time in ns as a decimal string."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    if not text.isdigit():
        raise ValueError(f"a result that is not a time in ns: {text[:80]!r}")
    return int(text)


def percentiles(values_ns):
    """p50, p99 and max in microseconds (nearest rank)."""
    v = sorted(values_ns)
    pick = lambda q: v[min(len(v) - 1, max(0, int(q * len(v) + 0.5) - 1))]  # noqa: E731
    return {k: round(x / 1000.0, 1) for k, x in
            (("p50", pick(0.50)), ("p99", pick(0.99)), ("max", v[-1]))}


def run_throughput(args, outcomes, submit_one, submit_batch, wait_results):
    """--mode single|bulk: submit every job, wait for every result, print the JSON line.

    submit_one(submit_ns) -> job id; submit_batch([submit_ns...]) -> [job id...];
    wait_results(): returns once outcomes has every result (or fails).
    """
    t0_wall = time.time_ns()
    t0 = time.monotonic()
    if args.mode == "single":
        for _ in range(args.jobs):
            ns = time.time_ns()
            outcomes.submitted(submit_one(ns), ns)
    else:
        left = args.jobs
        while left:
            batch = [time.time_ns()] * min(args.bulk, left)
            for job_id, ns in zip(submit_batch(batch), batch):
                outcomes.submitted(job_id, ns)
            left -= len(batch)
    submit_s = time.monotonic() - t0
    wait_results()
    done_s = (outcomes.last_seen_ns() - t0_wall) / 1e9
    print(json.dumps({"jobs": args.jobs, "submit_s": round(submit_s, 6),
                      "done_s": round(done_s, 6)}), flush=True)


def run_rate(args, outcomes, submit_one, wait_results):
    """--rate R: submit at scheduled times t0 + i/R (open loop: neither after the previous
    result nor after the previous submit returned), then report the latencies. The send lag
    is how late each submit began against its schedule."""
    due_times = queue.Queue()
    lag_ns = []

    def submitter():
        while (due := due_times.get()) is not None:
            lag_ns.append(max(0.0, time.monotonic() - due) * 1e9)
            ns = time.time_ns()
            outcomes.submitted(submit_one(ns), ns)

    threads = [threading.Thread(target=submitter) for _ in range(SUBMITTERS)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    for i in range(args.jobs):
        due = t0 + i / args.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        due_times.put(due)
    for t in threads:
        due_times.put(None)
    for t in threads:
        t.join()
    wait_results()
    start, result = [], []
    for job_id, submit_ns in outcomes.submit_ns.items():
        _, start_ns, seen_ns = outcomes.started[job_id]
        start.append(start_ns - submit_ns)
        result.append(seen_ns - submit_ns)
    print(json.dumps({"jobs": args.jobs, "rate": args.rate, "start_us": percentiles(start),
                      "result_us": percentiles(result), "send_lag_us": percentiles(lag_ns)}),
          flush=True)
