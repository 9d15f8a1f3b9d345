#!/usr/bin/env python3
"""The Python producer of docs/queue.md runs as written: every ```python block of the page is
run with Debian's python3 and redis-py against a real redis-server, with a spool-queue worker
serving the queue it names, and must print the worker's answer. Run twice: the second time the
key finds the first job, done."""

import os
import re
import subprocess
import sys
import tempfile

from queue_harness import Redis

HERE = os.path.dirname(os.path.abspath(__file__))

DOC = os.path.join(HERE, "..", "..", "docs", "queue.md")
QUEUE_BIN = os.environ.get("SPOOL_QUEUE", "")
PYTHON = "/usr/bin/python3"  # Debian's, with python3-redis (scripts/install-deps.sh)


def main():
    if not QUEUE_BIN or not os.access(QUEUE_BIN, os.X_OK):
        print("SPOOL_QUEUE must name the spool-queue binary", file=sys.stderr)
        return 2
    with open(DOC) as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    if not blocks:
        print(f"no python block in {DOC}", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="spool-queue-python-")
    redis = Redis(tmp)
    url = redis.url
    worker = None
    failed = 0
    try:
        queues = set(re.findall(r'queue = "([^"]+)"', "".join(blocks)))
        worker = subprocess.Popen([QUEUE_BIN, "--store", url, "worker", "--queue", *queues],
                                  stdout=subprocess.PIPE, text=True)
        ready = worker.stdout.readline()
        if not ready.startswith("ready"):
            print(f"the worker did not start: {ready!r}", file=sys.stderr)
            return 1
        for run in (1, 2):
            for i, code in enumerate(blocks):
                r = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True,
                                   timeout=120, env={**os.environ, "SPOOL_REDIS_URL": url})
                ok = r.returncode == 0 and "hello from Python" in r.stdout
                print(("ok   " if ok else "FAIL ") + f"docs/queue.md python block {i + 1}, "
                      f"run {run}: {r.stdout.strip()!r}", flush=True)
                if not ok:
                    print(r.stderr, file=sys.stderr)
                    failed += 1
    finally:
        if worker:
            worker.terminate()
            worker.wait()
        redis.stop()
        subprocess.run(["rm", "-rf", tmp])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
