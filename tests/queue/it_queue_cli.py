#!/usr/bin/env python3
"""spool-queue, the command line, against a real redis-server: every command, its JSON and exit
status, the worker's built-in tasks, its /metrics, its drain on SIGTERM, bad input, a Redis
that is down, another build's functions in Redis, and a worker and submit --wait through Redis
Sentinel (cluster/fleet.py's store, as `make cluster` starts it)."""

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import fleet  # noqa: E402
import wire  # noqa: E402
from queue_harness import Redis, check, report, wait_for  # noqa: E402

QUEUE_BIN = os.environ.get("SPOOL_QUEUE", "")
SANITIZED = bool(os.environ.get("SPOOL_SANITIZE"))


def cli(url, *args, stdin=None, timeout=60):
    r = subprocess.run([QUEUE_BIN, "--store", url, *args], input=stdin, capture_output=True,
                       text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


class Worker:
    def __init__(self, url, *args):
        self.proc = subprocess.Popen([QUEUE_BIN, "--store", url, "worker", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("ready "):
            self.proc.kill()
            raise AssertionError(f"worker did not start: {line!r} {self.proc.stderr.read()}")
        self.name = line.split()[1]

    def stop(self, sig=signal.SIGTERM, timeout=60):
        self.proc.send_signal(sig)
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err


def metrics_port(worker):
    line = worker.proc.stderr.readline()
    check("metrics on http://127.0.0.1:" in line, "the worker names its metrics address", line)
    return int(line.rsplit(":", 1)[1].split("/")[0])


def test_commands(url, tmp):
    rc, out, _ = cli(url, "submit", "q", "echo", "hello")
    check(rc == 0 and out.strip() == "q/1", "submit prints the job id", out)
    rc, out, _ = cli(url, "status", "q/1")
    st = json.loads(out)
    check(rc == 0 and st["state"] == "queued" and st["task"] == "echo" and st["payload_size"] == 5,
          "status is JSON with the job's state", out)
    rc, out, _ = cli(url, "stats", "q")
    s = json.loads(out)
    check(rc == 0 and s["queued"] == 1 and s["submitted"] == 1 and s["lag_ms"] >= 0,
          "stats QUEUE is JSON with the figures", out)

    record = os.path.join(tmp, "record.txt")
    w = Worker(url, "--queue", "q", "--threads", "2", "--record-file", record,
               "--metrics-port", "0", "--lease", "2s")
    port = metrics_port(w)
    rc, out, _ = cli(url, "submit", "q", "echo", "again", "--wait")
    check(rc == 0 and out.splitlines() == ["q/2", "again"], "submit --wait prints the result", out)
    rc, out, _ = cli(url, "submit", "q", "sha256", "abc", "--wait")
    check(out.splitlines()[-1] == hashlib.sha256(b"abc").hexdigest(), "sha256 of the payload", out)
    rc, out, _ = cli(url, "submit", "q", "echo", "-", "--wait", stdin="from stdin")
    check(out.splitlines()[-1] == "from stdin", "a payload of - is read from stdin", out)
    rc, out, _ = cli(url, "submit", "q", "sleep", "50", "--wait")
    check(rc == 0 and out.splitlines()[-1] == "slept 50 ms", "sleep waits the payload's ms", out)
    rc, out, err = cli(url, "submit", "q", "fail", "boom", "--wait")
    check(rc == 1 and "failed: boom" in err, "a failed job exits 1 with its error", err)
    rc, out, _ = cli(url, "submit", "q", "record", "line one", "--wait")
    with open(record) as f:
        lines = f.read().splitlines()
    check(rc == 0 and lines == ["line one 1"], "record appends payload and attempt", lines)
    rc, out, err = cli(url, "submit", "q", "record", "fail-first x", "--attempts", "2",
                       "--backoff", "10ms", "--wait")
    with open(record) as f:
        lines = f.read().splitlines()
    check(rc == 0 and lines[-1] == "fail-first x 2",
          "record fails attempt 1 of a fail-first payload, then records attempt 2", lines)
    rc, out, err = cli(url, "submit", "q", "nosuchtask", "--wait")
    check(rc == 1 and "unknown task 'nosuchtask'" in err, "an unknown task fails its job", err)
    rc, out, err = cli(url, "submit", "q", "sleep", "5000", "--time-limit", "100ms", "--wait")
    check(rc == 1 and "time limit of 100 ms exceeded" in err, "a time limit fails the attempt",
          err)
    rc, out, err = cli(url, "submit", "q", "sleep", "10000", "--wait", "--timeout", "100ms")
    check(rc == 1 and "no outcome within 100 ms" in err, "--wait --timeout gives up", err)
    sleeping = out.splitlines()[0]
    rc, out, _ = cli(url, "cancel", sleeping)
    check(rc == 0 and "cancelled (it was " in out, "cancel a running job", out)
    rc, out, err = cli(url, "cancel", sleeping)
    check(rc == 5 and "cancelled already" in err, "cancel a finished job: exit 5", err)

    # Keys, delays, priorities.
    rc, first, _ = cli(url, "submit", "q", "echo", "one", "--key", "k1", "--wait")
    rc, second, _ = cli(url, "submit", "q", "echo", "two", "--key", "k1", "--wait")
    check(first.splitlines() == second.splitlines() and first.splitlines()[1] == "one",
          "a second submission with the key returns the first job and its result",
          (first, second))
    rc, out, _ = cli(url, "submit", "q", "echo", "later", "--delay", "1h", "--priority", "high")
    later = out.strip()
    st = json.loads(cli(url, "status", later)[1])
    check(st["state"] == "delayed" and st["priority"] == "high" and st["due_ms"] > 0,
          "a delayed job waits, with its priority", st)
    rc, out, _ = cli(url, "cancel", later)
    check(rc == 0 and "it was delayed" in out, "cancel a delayed job", out)

    # Dead jobs: listed, requeued, deleted.
    rc, out, _ = cli(url, "dead", "q")
    dead = json.loads(out)
    ids = [d["id"] for d in dead]
    check(rc == 0 and any(d["error"] == "boom" for d in dead), "dead lists the failed job", out)
    boom = next(d["id"] for d in dead if d["error"] == "boom")
    rc, out, _ = cli(url, "requeue", boom)
    check(rc == 0, "requeue a dead job", out)
    wait_for(lambda: json.loads(cli(url, "status", boom)[1])["attempt"] == 2
             and json.loads(cli(url, "status", boom)[1])["state"] == "dead", 30,
             "the requeued job to run again, and fail again")
    rc, out, _ = cli(url, "delete", boom)
    check(rc == 0 and cli(url, "status", boom)[0] == 4, "delete a dead job; its status is gone",
          out)
    rc, out, err = cli(url, "requeue", "q/1")
    check(rc == 5 and "not dead" in err, "requeue a job that is not dead: exit 5", err)
    check(len(ids) >= 2, "dead lists every dead job", ids)

    # Pause, resume, limit.
    rc, out, _ = cli(url, "pause", "q")
    check(rc == 0 and json.loads(cli(url, "stats", "q")[1])["paused"], "pause", out)
    rc, out, _ = cli(url, "submit", "q", "echo", "while paused")
    paused_job = out.strip()
    rc, out, err = cli(url, "limit", "q", "1")
    check(rc == 0 and "maximum length 1" in out, "limit sets the maximum length", (rc, out, err))
    rc, out, err = cli(url, "submit", "q", "echo", "no room")
    check(rc == 7 and "is full" in err, "a full queue refuses: exit 7", err)
    cli(url, "limit", "q", "0")
    check(json.loads(cli(url, "status", paused_job)[1])["state"] == "queued",
          "nothing starts while paused")
    rc, out, _ = cli(url, "resume", "q")
    wait_for(lambda: json.loads(cli(url, "status", paused_job)[1])["state"] == "done", 30,
             "the job to run once resumed")
    check(rc == 0, "resume")

    # /metrics.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    check(f'spool_queue_worker_done_total{{queue="q",worker="{w.name}"}}' in text
          and "spool_queue_worker_handler_seconds_bucket" in text
          and "spool_queue_worker_in_flight" in text, "the worker serves /metrics", text[:300])
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/other", timeout=10)
        check(False, "anything but /metrics is 404")
    except urllib.error.HTTPError as e:
        check(e.code == 404, "anything but /metrics is 404", e.code)

    # SIGTERM drains: the running job finishes and is recorded, the worker exits 0.
    rc, out, _ = cli(url, "submit", "q", "sleep", "700")
    running = out.strip()
    wait_for(lambda: json.loads(cli(url, "status", running)[1])["state"] == "running", 30,
             "the sleep job to start")
    code, err = w.stop()
    check(code == 0 and "stopped:" in err, "SIGTERM stops the worker, exit 0", err)
    check(json.loads(cli(url, "status", running)[1])["state"] == "done",
          "the job running at SIGTERM finished and was recorded")
    stats = json.loads(cli(url, "stats", "q")[1])
    check(stats["workers"] == [], "the stopped worker left the group", stats["workers"])
    rc, out, _ = cli(url, "stats")
    check(rc == 0 and [q["queue"] for q in json.loads(out)["queues"]] == ["q"],
          "stats with no queue lists every queue", out)

    # Jobs are given to an idle worker by their submission, unless it runs with --no-direct.
    for flags, given in (([], "1"), (["--no-direct"], "0")):
        w = Worker(url, "--queue", "dq", "--threads", "1", "--metrics-port", "0", *flags)
        port = metrics_port(w)
        label = f'spool_queue_worker_given_total{{queue="dq",worker="{w.name}"}} '

        # An idle worker lists itself with its first claim: wait until Redis has it.
        if not flags:
            host, redis_port = url.split("//", 1)[1].split("/")[0].rsplit(":", 1)
            wait_for(lambda: wire.redis_command(host, int(redis_port), "ZSCORE",
                                                "spool:{dq}:idle", w.name) is not None,
                     30, "the idle worker to list itself")
        rc, out, _ = cli(url, "submit", "dq", "echo", "direct?", "--wait")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        check(rc == 0 and out.splitlines()[-1] == "direct?" and label + given in text,
              f"a worker{' with --no-direct' if flags else ''} runs the job, given_total "
              f"{given}", (out, [ln for ln in text.splitlines() if "given" in ln]))
        w.stop()


def test_bad_input(url):
    for args, code, words in [
        (["submit", "my queue", "echo"], 2, "a space is not allowed"),
        (["submit", "q", "bad task"], 2, "task name"),
        (["submit", "q", "echo", "--attempts", "0"], 2, "attempts = 0"),
        (["submit", "q", "echo", "--delay", "soon"], 2, "expected a duration"),
        (["submit", "q", "echo", "--priority", "urgent"], 2, "low, normal or high"),
        (["submit", "q", "echo", "--key", "x" * 513], 2, "513 bytes"),
        (["status", "nonsense"], 2, "expected QUEUE/NUMBER"),
        (["status", "q/999"], 4, "does not exist"),
        (["frobnicate"], 2, "unknown command"),
        (["submit", "q"], 2, "expected 2 to 3 argument(s)"),
        (["worker", "--threads", "2"], 2, "--queue is required"),
        (["worker", "--queue", "q", "--lease", "10ms"], 2, "lease"),
        (["submit", "q", "echo", "--bogus"], 2, "unknown option --bogus"),
    ]:
        rc, out, err = cli(url, *args)
        check(rc == code and words in err, f"{' '.join(args)[:40]}: exit {code}, says why",
              (rc, err))
    r = subprocess.run([QUEUE_BIN, "submit", "q", "echo"], capture_output=True, text=True)
    check(r.returncode == 2 and "--store URL is required" in r.stderr, "no --store: exit 2")
    for bad in ["redis://", "redis://h:0", "http://h", "redis-sentinel://h/", "sqlite:x.db"]:
        rc, out, err = cli(bad, "stats", "q")
        check(rc == 2 and ("store" in err or "Redis" in err), f"malformed URL {bad}: exit 2", err)


def test_redis_down(tmp):
    port = wire.free_port()
    url = f"redis://127.0.0.1:{port}"
    rc, out, err = cli(url, "submit", "q", "echo")
    check(rc == 3 and "127.0.0.1" in err, "Redis down: exit 3, names where", err)
    rc, out, err = cli(url, "stats", "q")
    check(rc == 3, "Redis down: stats exit 3", err)


def test_other_build(tmp):
    """Another build's functions in Redis: every command refuses them (exit 8, both versions
    named) and leaves them; --replace-functions loads this build's, after which plain commands
    work."""
    redis = Redis(tmp)
    try:
        other = ("#!lua name=spool_queue\nredis.register_function{function_name = "
                 "'spool_version', callback = function() return 'another' end, "
                 "flags = {'no-writes'}}\n")
        wire.redis_command("127.0.0.1", redis.port, "FUNCTION", "LOAD", other)
        for args in (["submit", "q", "echo"], ["stats", "q"]):
            rc, out, err = cli(redis.url, *args)
            check(rc == 8 and "another spool build (version another" in err
                  and "--replace-functions" in err,
                  f"another build's functions: {args[0]} exits 8 and says why", (rc, err))
        version = wire.redis_command("127.0.0.1", redis.port, "FCALL_RO", "spool_version", "0")
        check(version == b"another", "the other build's functions are left in place", version)
        rc, out, err = cli(redis.url, "--replace-functions", "stats", "q")
        check(rc == 0, "--replace-functions loads this build's functions", (rc, err))
        rc, out, err = cli(redis.url, "submit", "q", "echo")
        check(rc == 0 and out.strip() == "q/1", "then a plain submit works", (rc, out, err))
    finally:
        redis.stop()


def test_sentinel(tmp):
    """A worker and submit --wait through Sentinel, on the fleet's store (a primary, a replica,
    three Sentinels), as `make cluster` starts it, with a replica's confirmation asked."""
    layout = fleet.Layout.free(nodes=0)
    f = fleet.Fleet(os.path.join(tmp, "fleet"), layout, spoold="/bin/true")
    f.prepare()
    try:
        f.store.start()
        url = f.store.spec()
        w = Worker(url, "--queue", "sq", "--threads", "2")
        rc, out, err = cli(url, "--replicas", "1", "submit", "sq", "echo", "via sentinel",
                           "--wait")
        check(rc == 0 and out.splitlines()[-1] == "via sentinel",
              "worker and submit --wait through redis-sentinel://", (out, err))
        code, err = w.stop()
        check(code == 0, "the Sentinel worker stops on SIGTERM", err)
    finally:
        f.stop()


def main():
    if not QUEUE_BIN or not os.access(QUEUE_BIN, os.X_OK):
        print("SPOOL_QUEUE must name the spool-queue binary", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="spool-queue-cli-")
    redis = Redis(tmp)
    try:
        test_commands(redis.url, tmp)
        test_bad_input(redis.url)
        test_redis_down(tmp)
        test_other_build(tmp)
        test_sentinel(tmp)
    finally:
        redis.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return report()


if __name__ == "__main__":
    sys.exit(main())
