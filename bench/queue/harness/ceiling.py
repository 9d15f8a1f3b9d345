"""The Redis ceiling: the commands that one job of a system costs, replayed pipelined as fast as
redis-server takes them, in jobs per second: the rate no driver could pass on this Redis.

Two sources for a system's commands:
- its producer's --print-commands (spool's driver may offer it): one JSON object
  {"setup": [[arg, ...], ...], "job": [[arg, ...], ...]}: `setup` runs once, `job` once per
  replayed job with "{job}" in any argument replaced by the job's number (1, 2, ...), so that
  each job has its own keys and stream ids; the commands as one job really issues them, in
  order, with blocking reads in their non-blocking form;
- MONITOR during a run of jobs submitted one at a time: every command the producer and the
  worker sent (a script's own commands run inside its EVAL/EVALSHA and are counted apart),
  replayed once on an emptied Redis (scripts stay cached), each client's commands in the order
  it sent them, the clients side by side. An approximation: a read that blocked and was served
  by a later push is not issued again by Redis, so its replay returns nothing and the pushed
  item is popped by a later read; across clients, the order of the capture is not kept;
  ids that Redis generated (XADD *) differ in the replay; XREAD gets a COUNT, since from an id
  of the capture the replay's stream holds every later entry. Not copied to make it longer:
  copies pile their jobs up in the lists that later copies scan. Error replies are shown.
Blocking commands are replayed in their non-blocking form (BRPOP -> LMPOP, XREADGROUP BLOCK ->
XREADGROUP, ...); commands that would change the replay connection's mode are left out.
The replay runs through `redis-cli --pipe` (which writes while it reads the replies), several
at once: a template's jobs dealt over --ceiling-connections, each with a queue of its own, a
capture's clients each on one.
"""

import collections
import json
import re
import subprocess
import tempfile
import threading
import time

import wire  # cluster/wire.py (run.py puts cluster/ on the path)

LEFT_OUT = {b"SUBSCRIBE", b"PSUBSCRIBE", b"SSUBSCRIBE", b"UNSUBSCRIBE", b"PUNSUBSCRIBE",
            b"SUNSUBSCRIBE", b"MONITOR", b"CLIENT", b"HELLO", b"AUTH", b"QUIT", b"RESET",
            b"CONFIG", b"SHUTDOWN", b"DEBUG", b"FLUSHALL", b"FLUSHDB", b"SELECT"}
MARKER_LIMIT_S = 30
XREAD_COUNT = 8


def non_blocking(args):
    """The command as it would run with its data already there, without waiting."""
    name = args[0].upper()
    if name in (b"BLPOP", b"BRPOP"):
        keys = args[1:-1]
        return [b"LMPOP", b"%d" % len(keys), *keys, b"LEFT" if name == b"BLPOP" else b"RIGHT"]
    if name in (b"BZPOPMIN", b"BZPOPMAX"):
        keys = args[1:-1]
        return [b"ZMPOP", b"%d" % len(keys), *keys, name[-3:]]
    if name in (b"BLMPOP", b"BZMPOP"):
        return [name[1:], *args[2:]]
    if name == b"BLMOVE":
        return [b"LMOVE", *args[1:-1]]
    if name == b"BRPOPLPUSH":
        return [b"RPOPLPUSH", *args[1:-1]]
    if name in (b"XREAD", b"XREADGROUP"):
        out, i = [], 0
        while i < len(args):
            if args[i].upper() == b"BLOCK":
                i += 2
                continue
            out.append(args[i])
            i += 1
        if name == b"XREAD" and b"COUNT" not in (x.upper() for x in out):
            # From an id of the capture, the replay's stream holds every entry after it: a
            # reader that kept up reads a job's few entries, so does this one.
            out[1:1] = [b"COUNT", b"%d" % XREAD_COUNT]
        return out
    if name == b"WAIT":
        return [b"WAIT", b"0", b"0"]
    return args


def parse_monitor_line(line):
    """'1700000000.1 [0 127.0.0.1:5000] "SET" "k\\x00" "v"' -> ('127.0.0.1:5000', [b'SET', ...]).

    The client is 'lua' for commands a script ran. Arguments are quoted with C-like escapes.
    """
    head, _, rest = line.partition("] ")
    client = head.rpartition(" ")[2]
    args, i, n = [], 0, len(rest)
    while i < n:
        if rest[i] != '"':
            i += 1
            continue
        i += 1
        buf = bytearray()
        while rest[i] != '"':
            c = rest[i]
            if c == "\\":
                e = rest[i + 1]
                if e == "x":
                    buf.append(int(rest[i + 2:i + 4], 16))
                    i += 4
                    continue
                buf += {"n": b"\n", "r": b"\r", "t": b"\t", "a": b"\a", "b": b"\b"}.get(
                    e, e.encode())
                i += 2
                continue
            buf += c.encode()
            i += 1
        args.append(bytes(buf))
        i += 1
    return client, args


class Capture:
    """The commands Redis ran while it was on, by client, from a MONITOR connection."""

    def __init__(self, port, exclude=()):
        self.port = port
        self.conn = wire.Connection(port)
        self.exclude = set(exclude) | {self.conn.local_address}
        self.conn.command("MONITOR")
        self.lines = []
        self.marker = f"end-of-capture-{time.monotonic_ns()}"
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while True:
            line = self.conn.file.readline()
            if not line or self.marker.encode() in line:
                return
            self.lines.append(line[1:-2].decode("ascii", "replace"))

    def stop(self):
        """Returns [(client, args)]: top-level commands, and those of scripts as 'lua'.

        MONITOR shows commands in the order Redis ran them, so once an ECHO sent now shows,
        every earlier command has.
        """
        with wire.Connection(self.port) as c:
            c.command("ECHO", self.marker)
        self.thread.join(MARKER_LIMIT_S)
        if self.thread.is_alive():
            raise RuntimeError("MONITOR did not show the end marker")
        self.conn.close()
        parsed = (parse_monitor_line(l) for l in self.lines if "[" in l)
        return [(c, a) for c, a in parsed if c not in self.exclude and a]


def summary(commands, jobs):
    """Commands per job, top-level and inside scripts, and the most frequent ones."""
    top = collections.Counter(a[0].upper().decode() for c, a in commands if c != "lua")
    lua = sum(1 for c, _ in commands if c == "lua")
    n = sum(top.values())
    common = ", ".join(f"{k} {v / jobs:.2f}" for k, v in top.most_common(6))
    return {"per_job": n / jobs, "lua_per_job": lua / jobs, "common": common}


def capture_replay(commands):
    """RESP bytes replaying a MONITOR capture once, one stream per client of the capture (each
    in its client's order): the clients' own commands, not their scripts'."""
    by_client = {}
    for c, a in commands:
        if c != "lua" and a[0].upper() not in LEFT_OUT:
            by_client.setdefault(c, []).append(wire.encode(non_blocking(a)))
    return [b"".join(v) for v in by_client.values()]


def template_replay(template, queue, jobs, connections):
    """(setup commands, RESP bytes of `jobs` jobs dealt over `connections` streams) from a
    --print-commands template printed for `queue`. Each stream has a queue of its own (the
    queue's name in any argument becomes QUEUE.K), so that ids that increase with {job}
    increase within each stream, as they must in a Redis stream; what a job costs is the
    same on any queue."""
    setup, out = [], []
    for k in range(connections):
        own = lambda c: [x.encode().replace(queue.encode(), f"{queue}.{k}".encode())  # noqa
                         for x in c]
        setup += [own(c) for c in template["setup"]]
        job = [own(c) for c in template["job"]]
        out.append(b"".join(
            wire.encode(non_blocking([a.replace(b"{job}", str(n).encode()) for a in c]))
            for n in range(k + 1, jobs + 1, connections) for c in job))
    return setup, out


def replay(redis_cli, port, setup, streams, jobs):
    """Runs setup, then pipes each stream through a `redis-cli --pipe` of its own, all at once:
    Redis reads at most 16 KB from a connection per turn of its loop and, with appendfsync
    always, fsyncs once per turn, so one connection alone would measure fsyncs, not Redis.

    Returns (jobs/s from the first start to the last end, replies, error replies, the first
    error lines)."""
    with wire.Connection(port) as conn:
        for c in setup:
            try:
                conn.command(*c)
            except wire.RespError:
                pass  # e.g. a consumer group that exists already
    files, procs = [], []
    try:
        for blob in streams:
            f = tempfile.TemporaryFile()
            f.write(blob)
            f.seek(0)
            files.append(f)
        t0 = time.monotonic()
        for f in files:
            procs.append(subprocess.Popen([redis_cli, "-h", "127.0.0.1", "-p", str(port),
                                           "--pipe"], stdin=f, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True))
        outputs = [p.communicate(timeout=600)[0] for p in procs]
        seconds = time.monotonic() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for f in files:
            f.close()
    replies = errors = 0
    first = []
    for out in outputs:
        m = re.search(r"errors: (\d+), replies: (\d+)", out)
        if not m:
            raise RuntimeError(f"redis-cli --pipe: {out.strip()[:300]}")
        errors += int(m.group(1))
        replies += int(m.group(2))
        first += [line for line in out.splitlines() if line and not line.startswith(
            ("All data", "Waiting", "Last reply", "errors:"))][:3 - len(first)]
    return jobs / seconds, replies, errors, first


def print_commands(system, url, queue):
    """The system's own list of a job's commands (--print-commands), or None without one."""
    try:
        r = subprocess.run(system.producer_argv + ["--redis", url, "--queue", queue,
                                                    "--print-commands"],
                           capture_output=True, text=True, timeout=60, env=system.env)
        t = json.loads(r.stdout) if r.returncode == 0 else None
        if isinstance(t, dict) and isinstance(t.get("job"), list) and t["job"]:
            t.setdefault("setup", [])
            return t
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    return None
