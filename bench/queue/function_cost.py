#!/usr/bin/env python3
"""What spool's Redis functions cost inside Redis: commands and microseconds per call.

    bench/queue/function_cost.py [--cli PATH] [--jobs N] [--room R] [--aging MS] [--rounds K]

Starts a redis-server of its own (AOF off: the functions' own cost, not the disk's) on a free
loopback port, loads the functions through `spool-queue submit` (the CLI loads its library's
version), then measures two patterns, each K times, with INFO commandstats reset before each:
  trickle  one spool_submit of one job, then one spool_claim for room R (a worker's claim when
           jobs arrive one at a time: it finds fewer than it has room for), N times;
  backlog  N jobs submitted 100 per call, then claimed R at a time until none is left.
Prints, per pattern, the commands the functions ran per FCALL (deterministic: it changes only
when the Lua does) and the microseconds per FCALL (median and min-max of the rounds). Two
builds of the queue library compare by running this with each one's --cli."""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))  # wire.py: the Redis client
from harness import redis_server  # noqa: E402

QUEUE = "fcost"
PREFIX = "spool:{" + QUEUE + "}"
# One job of spool_submit: task payload key prio delay_ms attempts backoff_ms backoff_max_ms
# limit_ms ttl_s takeovers.
JOB = ["echo", "payload", "", 1, 0, 1, 0, 0, 0, 3600, 3]


def submit(r, count):
    args = ["FCALL", "spool_submit", 1, PREFIX, QUEUE, "", count]
    for _ in range(count):
        args += JOB
    r.command(*args)


def claim(r, room, aging):
    jobs = r.command("FCALL", "spool_claim", 1, PREFIX, QUEUE, "bench-consumer", room, 30000, 0,
                     aging)[0]
    return len(jobs)


def drain(r, room, aging):
    while claim(r, room, aging) > 0:
        pass


def costs(r):
    """(commands the functions ran, FCALLs, microseconds in FCALL) since the last RESETSTAT."""
    stats = r.info("commandstats")
    calls = {name[len("cmdstat_"):]: dict(kv.split("=") for kv in value.split(","))
             for name, value in stats.items() if name.startswith("cmdstat_")}
    fcall = calls.pop("fcall", {"calls": "0", "usec": "0"})
    for outside in ("info", "config|resetstat"):
        calls.pop(outside, None)
    inner = sum(int(c["calls"]) for c in calls.values())
    return inner, int(fcall["calls"]), int(fcall["usec"])


def trickle(r, a):
    drain(r, a.room, a.aging)
    r.command("CONFIG", "RESETSTAT")
    for _ in range(a.jobs):
        submit(r, 1)
        claim(r, a.room, a.aging)
    return costs(r)


def backlog(r, a):
    drain(r, a.room, a.aging)
    for left in range(a.jobs, 0, -100):
        submit(r, min(100, left))
    r.command("CONFIG", "RESETSTAT")
    drain(r, a.room, a.aging)
    inner, fcalls, usec = costs(r)
    return inner, fcalls, usec


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default=os.path.join(HERE, "..", "..", "build", "release", "queue",
                                                 "cli", "spool-queue"))
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--room", type=int, default=2)
    p.add_argument("--aging", type=int, default=100, help="ms, as the worker's default")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    if a.jobs <= 0 or a.room <= 0 or a.rounds <= 0 or a.aging < 0:
        p.error("--jobs, --room and --rounds must be positive, --aging not negative")
    with tempfile.TemporaryDirectory(prefix="spool-fcost-") as tmp:
        r = redis_server.RedisServer(tmp)
        try:
            r.command("CONFIG", "SET", "appendonly", "no")
            subprocess.run([a.cli, "--store", f"redis://127.0.0.1:{r.port}", "submit", QUEUE,
                            "echo", "x"], check=True, stdout=subprocess.DEVNULL)
            print(f"# {a.cli}; redis-server {r.version}; {a.jobs} jobs, room {a.room}, aging "
                  f"{a.aging} ms, {a.rounds} rounds")
            for name, pattern in (("trickle", trickle), ("backlog", backlog)):
                per_call, us = [], []
                for _ in range(a.rounds):
                    inner, fcalls, usec = pattern(r, a)
                    per_call.append(inner / fcalls)
                    us.append(usec / fcalls)
                print(f"{name:8} commands per FCALL {statistics.median(per_call):.2f}; us per "
                      f"FCALL {statistics.median(us):.1f} ({min(us):.1f}-{max(us):.1f})")
        finally:
            r.stop()


if __name__ == "__main__":
    main()
