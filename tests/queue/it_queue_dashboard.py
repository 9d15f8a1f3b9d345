#!/usr/bin/env python3
"""spoold's /queue page and its JSON (/api/queues, /api/queue?name=Q): a queue's figures read
from Redis as jobs are submitted and run; errors for a bad name and for a spoold that has no
queue store."""

import json
import os
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import wire  # noqa: E402
from queue_harness import Redis, check, report, wait_for  # noqa: E402

QUEUE_BIN = os.environ.get("SPOOL_QUEUE", "")
SPOOLD = os.environ.get("SPOOLD", "")
SITE = os.environ.get("SPOOLD_SITE", "")


def get(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def start_spoold(tmp, *args):
    port = wire.free_port()
    p = subprocess.Popen([SPOOLD, "--port", str(port), "--root", SITE, *args],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp)
    line = p.stdout.readline()
    if "listening" not in line:
        p.kill()
        raise AssertionError(f"spoold did not start: {line}")
    return p, port


def main():
    for name, path in (("SPOOL_QUEUE", QUEUE_BIN), ("SPOOLD", SPOOLD)):
        if not path or not os.access(path, os.X_OK):
            print(f"{name} must name the binary", file=sys.stderr)
            return 2
    tmp = tempfile.mkdtemp(prefix="spool-queue-dashboard-")
    redis = Redis(tmp)
    url = redis.url
    procs = []
    try:
        def cli(*args):
            return subprocess.run([QUEUE_BIN, "--store", url, *args], capture_output=True,
                                  text=True, timeout=60)
        spoold, port = start_spoold(tmp, "--queue-store", url)
        procs.append(spoold)
        status, body = get(port, "/api/queues")
        check(status == 200 and json.loads(body) == {"queues": []}, "no queue yet", body)
        for i in range(5):
            cli("submit", "mail", "echo", f"m{i}")
        status, body = get(port, "/api/queue?name=mail")
        s = json.loads(body) if status == 200 else {}
        check(status == 200 and s.get("queued") == 5 and s.get("done") == 0,
              "/api/queue shows the jobs waiting", body)
        check(json.loads(get(port, "/api/queues")[1]) == {"queues": ["mail"]},
              "/api/queues lists the queue")
        worker = subprocess.Popen([QUEUE_BIN, "--store", url, "worker", "--queue", "mail"],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(worker)
        worker.stdout.readline()
        wait_for(lambda: json.loads(get(port, "/api/queue?name=mail")[1])["done"] == 5, 30,
                 "the dashboard's figures to show the jobs done")
        s = json.loads(get(port, "/api/queue?name=mail")[1])
        check(s["queued"] == 0 and len(s["workers"]) == 1, "and the worker", s)
        status, body = get(port, "/queue")
        check(status == 200 and "queue.js" in body, "/queue serves the page", status)
        check("/charts.js" in body, "/queue loads the charts shared with the dashboard")
        status, body = get(port, "/queue.js")
        check(status == 200 and "/api/queue?name=" in body, "the page's script", status)
        status, body = get(port, "/charts.js")
        check(status == 200 and "figure.chart svg" in body, "the charts' script", status)
        status, body = get(port, "/api/queue?name=bad%20name")
        check(status == 400 and "a space is not allowed" in body, "a bad queue name: 400", body)
        status, body = get(port, "/api/queue")
        check(status == 400, "no name: 400", body)

        # Redis down: 503, and back once it returns.
        redis.stop()
        status, body = get(port, "/api/queue?name=mail")
        check(status == 503, "Redis down: 503", (status, body[:200]))

        plain, pport = start_spoold(tmp, "--store", f"sqlite:{tmp}/g.db")
        procs.append(plain)
        status, body = get(pport, "/api/queues")
        check(status == 404 and "--queue-store" in body, "no queue store: 404 saying why", body)
        r = subprocess.run([SPOOLD, "--queue-store", "sqlite:x.db"], capture_output=True,
                           text=True)
        check(r.returncode != 0 and "--queue-store" in r.stderr, "a malformed --queue-store",
              r.stderr)
    finally:
        for p in procs:
            p.terminate()
            p.wait()
        redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    return report()


if __name__ == "__main__":
    sys.exit(main())
