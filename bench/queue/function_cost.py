#!/usr/bin/env python3
"""What spool's Redis functions cost inside Redis: commands and microseconds per call.

    bench/queue/function_cost.py [--cli PATH] [--jobs N] [--room R] [--aging MS] [--rounds K]
                                 [--finish-batch B] [--aof] [--detail]

Starts a redis-server of its own (AOF off unless --aof: the functions' own cost, not the
disk's) on a free loopback port, loads the functions through `spool-queue submit` (the CLI
loads its library's version), then measures four patterns, each K times, with INFO
commandstats reset before each:
  trickle  one spool_submit of one job, then one spool_claim for room R (a worker's claim when
           jobs arrive one at a time: it finds fewer than it has room for), N times;
  backlog  N jobs submitted 100 per call, then claimed R at a time until none is left;
  direct   the consumer listed idle with room R (spool_claim's LISTED_MS), then N jobs
           submitted one at a time, each started by its submission and put in the consumer's
           inbox; after every R, the worker's reads (XREAD of the inbox, an HMGET per job) and
           a claim, given the last inbox entry read, that lists it again;
  finish   N jobs submitted 100 per call for a producer's reply list and claimed (not
           measured), then their outcomes recorded B at a time (--finish-batch; a worker's
           reporter sends up to 256 per call): spool_finish alone.
Prints, per pattern, the commands the functions ran per FCALL (deterministic: it changes only
when the Lua does), the microseconds per FCALL, and the microseconds per job of every command
the pattern sent (the FCALLs and, for direct, the worker's reads): median and min-max of the
rounds. Two builds of the queue library compare by running this with each one's --cli."""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

DETAIL = False

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))  # wire.py: the Redis client
from harness import redis_server  # noqa: E402

QUEUE = "fcost"
PREFIX = "spool:{" + QUEUE + "}"
# One job of spool_submit: task payload key prio delay_ms attempts backoff_ms backoff_max_ms
# limit_ms ttl_s takeovers.
JOB = ["echo", "payload", "", 1, 0, 1, 0, 0, 0, 3600, 3]


# The producer's reply list of the finish pattern, where spool_finish tells each outcome.
REPLY = "spool:reply:fcost"


def submit(r, count, reply=""):
    args = ["FCALL", "spool_submit", 1, PREFIX, QUEUE, reply, count]
    for _ in range(count):
        args += JOB
    r.command(*args)


CONSUMER = "bench-consumer"
INBOX = PREFIX + ":inbox:" + CONSUMER
# How long a listing lasts (LISTED_MS): far longer than a round, so that none lapses.
LISTED_MS = 600000


def claim(r, room, aging, listed_ms=None, inbox_read=None):
    args = ["FCALL", "spool_claim", 1, PREFIX, QUEUE, CONSUMER, room, 30000, 0, aging]
    if listed_ms is not None:
        args.append(listed_ms)
        if inbox_read is not None:
            args.append(inbox_read)
    return len(r.command(*args)[0])


def drain(r, room, aging):
    while claim(r, room, aging) > 0:
        pass


def costs(r, jobs, top_level=None):
    """Since the last RESETSTAT: (commands the functions ran, FCALLs, microseconds in FCALL,
    microseconds per job of FCALL and of the commands sent outside functions). `top_level`
    counts those commands by name: commandstats cannot tell them from the functions' own."""
    top_level = top_level or {}
    stats = r.info("commandstats")
    calls = {name[len("cmdstat_"):]: dict(kv.split("=") for kv in value.split(","))
             for name, value in stats.items() if name.startswith("cmdstat_")}
    fcall = calls.pop("fcall", {"calls": "0", "usec": "0"})
    for outside in ("info", "config|resetstat"):
        calls.pop(outside, None)
    inner = sum(int(c["calls"]) for c in calls.values()) - sum(top_level.values())
    # A top-level command's time is taken as its kind's mean; the functions' calls of the same
    # command are already inside FCALL's time.
    outside_us = sum(float(calls[name]["usec_per_call"]) * n for name, n in top_level.items()
                     if name in calls)
    fcalls, fcall_us = int(fcall["calls"]), int(fcall["usec"])
    if DETAIL:
        inside_us = sum(int(c["usec"]) for c in calls.values()) - outside_us
        print(f"  per job: FCALL {fcalls / jobs:.2f} calls, {fcall_us / jobs:.1f} us, of which "
              f"commands {inside_us / jobs:.1f} us and the rest (Lua, arguments, replies) "
              f"{(fcall_us - inside_us) / jobs:.1f}")
        for name, c in sorted(calls.items(), key=lambda kv: -int(kv[1]["usec"])):
            n = int(c["calls"]) - top_level.get(name, 0)
            if n > 0:
                per_call = int(c["usec"]) / int(c["calls"])
                print(f"    {name:14} {n / jobs:5.2f} calls {per_call:6.2f} us/call")
    return inner, fcalls, fcall_us, (fcall_us + outside_us) / jobs


def trickle(r, a):
    drain(r, a.room, a.aging)
    r.command("CONFIG", "RESETSTAT")
    for _ in range(a.jobs):
        submit(r, 1)
        claim(r, a.room, a.aging)
    return costs(r, a.jobs)


def backlog(r, a):
    drain(r, a.room, a.aging)
    for left in range(a.jobs, 0, -100):
        submit(r, min(100, left))
    r.command("CONFIG", "RESETSTAT")
    drain(r, a.room, a.aging)
    return costs(r, a.jobs)


def direct(r, a):
    drain(r, a.room, a.aging)
    claim(r, a.room, a.aging, LISTED_MS)
    r.command("CONFIG", "RESETSTAT")
    reads = {"xread": 0, "hmget": 0}
    given = 0
    for i in range(a.jobs):
        submit(r, 1)
        given += 1
        if given == a.room or i == a.jobs - 1:
            reply = r.command("XREAD", "COUNT", given, "STREAMS", INBOX, "0-0") or []
            entries = reply[0][1] if reply else []
            if len(entries) != given:
                sys.exit(f"direct: {len(entries)} of {given} jobs given to the listed consumer; "
                         "the submissions did not start them")
            for _, fields in entries:
                fields = [f.decode() if isinstance(f, bytes) else f for f in fields]
                n = dict(zip(fields[::2], fields[1::2]))["job"]
                r.command("HMGET", f"{PREFIX}:job:{n}", "state", "attempt", "owner", "task",
                          "payload", "key", "limit", "entry", "level")
            last = entries[-1][0]
            reads["xread"] += 1
            reads["hmget"] += len(entries)
            claim(r, a.room, a.aging, LISTED_MS, last.decode() if isinstance(last, bytes) else last)
            given = 0
    return costs(r, a.jobs, reads)


def finish(r, a):
    drain(r, a.room, a.aging)
    for left in range(a.jobs, 0, -100):
        submit(r, min(100, left), REPLY)
    held = []
    while len(held) < a.jobs:
        jobs = r.command("FCALL", "spool_claim", 1, PREFIX, QUEUE, CONSUMER, 100, 30000, 0,
                         a.aging)[0]
        if not jobs:
            sys.exit(f"finish: {len(held)} of {a.jobs} jobs claimed")
        for job in jobs:
            job_id = job[0].decode() if isinstance(job[0], bytes) else job[0]
            held.append((job_id.split("/", 1)[1], job[1]))
    r.command("CONFIG", "RESETSTAT")
    for first in range(0, len(held), a.finish_batch):
        part = held[first:first + a.finish_batch]
        args = ["FCALL", "spool_finish", 1, PREFIX, QUEUE, CONSUMER, len(part)]
        for n, attempt in part:
            args += [n, attempt, "ok", "", "0.5"]
        r.command(*args)
    r.command("DEL", REPLY)
    return costs(r, a.jobs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cli", default=os.path.join(HERE, "..", "..", "build", "release", "queue",
                                                 "cli", "spool-queue"))
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--room", type=int, default=2)
    p.add_argument("--aging", type=int, default=100, help="ms, as the worker's default")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--finish-batch", type=int, default=10,
                   help="outcomes per spool_finish in the finish pattern (10)")
    p.add_argument("--aof", action="store_true",
                   help="keep redis-server's append-only file (appendfsync everysec): the "
                   "functions' writes then cost their propagation to it too")
    p.add_argument("--detail", action="store_true",
                   help="per round, each command the functions ran: calls per job, us per call")
    a = p.parse_args()
    global DETAIL
    DETAIL = a.detail
    if a.jobs <= 0 or a.room <= 0 or a.rounds <= 0 or a.finish_batch <= 0 or a.aging < 0:
        p.error("--jobs, --room, --rounds and --finish-batch must be positive, --aging not "
                "negative")
    with tempfile.TemporaryDirectory(prefix="spool-fcost-") as tmp:
        r = redis_server.RedisServer(tmp)
        try:
            if a.aof:
                r.command("CONFIG", "SET", "appendfsync", "everysec")
            else:
                r.command("CONFIG", "SET", "appendonly", "no")
            subprocess.run([a.cli, "--store", f"redis://127.0.0.1:{r.port}", "submit", QUEUE,
                            "echo", "x"], check=True, stdout=subprocess.DEVNULL)
            print(f"# {a.cli}; redis-server {r.version}; {a.jobs} jobs, room {a.room}, aging "
                  f"{a.aging} ms, {a.finish_batch} outcomes per finish, {a.rounds} rounds, "
                  f"AOF {'everysec' if a.aof else 'off'}")
            for name, pattern in (("trickle", trickle), ("backlog", backlog), ("direct", direct),
                                  ("finish", finish)):
                per_call, us, per_job = [], [], []
                for _ in range(a.rounds):
                    inner, fcalls, usec, job_us = pattern(r, a)
                    per_call.append(inner / fcalls)
                    us.append(usec / fcalls)
                    per_job.append(job_us)
                print(f"{name:8} commands per FCALL {statistics.median(per_call):.2f}; us per "
                      f"FCALL {statistics.median(us):.1f} ({min(us):.1f}-{max(us):.1f}); us per "
                      f"job {statistics.median(per_job):.1f} ({min(per_job):.1f}-"
                      f"{max(per_job):.1f})")
        finally:
            r.stop()


if __name__ == "__main__":
    main()
