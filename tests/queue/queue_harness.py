"""What the queue's integration scripts share: a tally of named checks that carries on past a
failure, a bounded wait for another process, and a redis-server of their own on a free port."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import wire  # noqa: E402

failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what + ("" if cond else f"  [{detail}]"), flush=True)
    if not cond:
        failures.append(what)


def report():
    """Prints the tally; returns the exit status (1 if a check failed)."""
    if failures:
        print(f"{len(failures)} check(s) failed: {failures}")
        return 1
    print("all checks passed")
    return 0


def wait_for(pred, timeout=30, what="condition"):
    """Polls pred() until true; an exception of pred's ends the wait, the deadline fails it."""
    return wire.wait_for(pred, timeout, what, interval=0.02, errors=(), failure=AssertionError)


class Redis:
    """A redis-server on 127.0.0.1 without persistence, its files in a folder under tmp;
    started and answering PING when the constructor returns."""

    def __init__(self, tmp):
        self.port = wire.free_port()
        self.dir = os.path.join(tmp, f"redis-{self.port}")
        os.makedirs(self.dir)
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", self.dir, "--logfile", "redis.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.ping, 20, "redis-server to answer")
        self.url = f"redis://127.0.0.1:{self.port}"

    def ping(self):
        try:
            return wire.redis_command("127.0.0.1", self.port, "PING") == "PONG"
        except OSError:
            return False

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
