#!/usr/bin/env python3
"""A spoold fleet on one machine: a Redis primary and its replicas (two by default), three
Redis Sentinels, N spoold nodes on the Sentinel store, and HAProxy in front of the nodes.

Every part listens on an address of its own, so that each looks like a host of its own: an
address in 127.0.0.0/8, or (--netns) a network namespace of its own on a private bridge
(cluster/netns.py), where a part can be cut off from some parts and not from others. Processes
run in the background (new sessions, output to log files) and outlive the program that started
them; a pid file per process (pid and start time, so a reused pid is never mistaken for ours)
lets a later run stop exactly those processes and nothing else.

As a program (the Makefile's cluster targets):

    fleet.py up [--nodes N] [--replicas R] [--netns] [--dir DIR] [--spoold PATH]
                                                          start; returns once the fleet answers
    fleet.py status [--dir DIR]                           what runs, roles, HAProxy's view
    fleet.py rolling-restart [--dir DIR]                  SIGTERM and restart each node in turn
    fleet.py exec [--dir DIR] -- CMD...                   CMD in the client's namespace (--netns)
    fleet.py down [--dir DIR]                             stop everything it started

As a module (tests and benchmarks; Python standard library only):

    import fleet
    layout = fleet.Layout.free(nodes=3)      # a random 127.x.y.0/24 block, free ports
    f = fleet.Fleet(state_dir, layout, spoold="build/release/server/spoold")
    f.start()                                # returns when HAProxy has every node UP
    f.url                                    # "http://127.x.y.1:PORT/"
    f.kill_node(0); f.start_node(0)          # SIGKILL / start again, and wait for UP
    f.pause_node(1); f.resume_node(1)        # SIGSTOP / SIGCONT
    old = f.primary(); f.kill_redis(old)     # kill -9 the primary
    new = f.wait_for_new_primary(old)        # Sentinel promoted a replica
    f.start_redis(old); f.wait_replica_online(old)
    f.rolling_restart()                      # SIGTERM, wait, start, wait UP: node by node
    f.stop()                                 # also fleet.Fleet.attach(state_dir).stop()

cluster/README.md describes the layout and this interface; docs/scale-out.md every setting.
"""

import argparse
import dataclasses
import http.client
import json
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import netns  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MASTER_NAME = "fleet"
# The process that holds a fleet's network namespaces (`up --netns`): they are removed when it
# stops (cluster/netns.py), after every other part of the fleet.
LAB_PROCESS = "netlab"


class FleetError(Exception):
    """A part did not start, stop or reach the state asked for in time; the message says which
    and where its log is."""


def wait_for(predicate, timeout, what, interval=0.05, errors=None, failure=None):
    """Polls predicate() (another process's state) until it returns something true, and returns
    that; an exception of `errors` (default: OSError, RespError, FleetError) counts as not yet.
    Raises `failure` (default FleetError) naming `what` and the last value or error after
    `timeout` s."""
    errors = errors or (OSError, RespError, FleetError)
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except errors as e:
            last = e
        if time.monotonic() > end:
            raise (failure or FleetError)(f"timed out after {timeout:.0f} s waiting for {what} "
                                          f"(last: {last!r})")
        time.sleep(interval)


# ----------------------------------------------------------------------------------------------
# Redis protocol (one command per connection; enough for watching a fleet)
# ----------------------------------------------------------------------------------------------

class RespError(Exception):
    """An error reply from Redis, or a reply that is not RESP."""


def redis_command(addr, port, *args, timeout=2.0):
    """Sends one command to addr:port and returns the decoded reply (str for status, bytes for
    bulk strings, int, list, None). Raises OSError or RespError."""
    payload = f"*{len(args)}\r\n".encode()
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        payload += f"${len(a)}\r\n".encode() + a + b"\r\n"
    with socket.create_connection((addr, port), timeout=timeout) as s:
        s.sendall(payload)
        with s.makefile("rb") as f:
            return _read_reply(f)


def _read_reply(f):
    line = f.readline()
    if not line.endswith(b"\r\n"):
        raise RespError("connection closed before a complete reply")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RespError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2]
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise RespError(f"not a RESP reply: {line!r}")


def redis_info(addr, port, section="replication"):
    """INFO <section> as a dict of strings."""
    text = redis_command(addr, port, "INFO", section).decode()
    out = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


# ----------------------------------------------------------------------------------------------
# Where everything listens
# ----------------------------------------------------------------------------------------------

@dataclasses.dataclass
class Endpoint:
    name: str
    addr: str
    port: int
    ns: str = ""  # the network namespace it runs in ("": the machine's own)

    @property
    def text(self):
        return f"{self.addr}:{self.port}"


@dataclasses.dataclass
class Layout:
    """The addresses of one fleet. redis[0] is the first primary, the others its replicas.
    client_ns: the namespace a client of a fleet on private networks runs in ("" otherwise)."""
    haproxy: Endpoint
    stats: Endpoint
    nodes: list
    redis: list
    sentinels: list
    client_ns: str = ""

    @staticmethod
    def standard(nodes=3, prefix="127.0.0", replicas=2):
        """`make cluster`'s layout: HAProxy on 127.0.0.1:8080 (stats :8404), node i (0 to 8) on
        127.0.0.(11+i):8080, Redis on 127.0.0.21-(21+replicas):6379, Sentinels on
        127.0.0.31-33:26379."""
        return Layout(
            haproxy=Endpoint("haproxy", f"{prefix}.1", 8080),
            stats=Endpoint("stats", f"{prefix}.1", 8404),
            nodes=[Endpoint(f"web{i + 1}", f"{prefix}.{11 + i}", 8080) for i in range(nodes)],
            redis=[Endpoint(f"redis{i + 1}", f"{prefix}.{21 + i}", 6379)
                   for i in range(1 + replicas)],
            sentinels=[Endpoint(f"sentinel{i + 1}", f"{prefix}.{31 + i}", 26379)
                       for i in range(3)])

    @staticmethod
    def in_lab(hosts, nodes=3, replicas=2):
        """The same shape with every part on a host of its own: hosts(name) returns the
        (namespace, address) of a new host named `name` (netns.Lab.add_host does). A host
        named "client" is made too, for whatever talks to the fleet. The ports are the
        standard ones: every host has its own."""
        def on_host(name, port):
            ns, addr = hosts(name)
            return Endpoint(name, addr, port, ns)
        haproxy = on_host("haproxy", 8080)
        layout = Layout(
            haproxy=haproxy,
            stats=Endpoint("stats", haproxy.addr, 8404, haproxy.ns),
            nodes=[on_host(f"web{i + 1}", 8080) for i in range(nodes)],
            redis=[on_host(f"redis{i + 1}", 6379) for i in range(1 + replicas)],
            sentinels=[on_host(f"sentinel{i + 1}", 26379) for i in range(3)])
        layout.client_ns = hosts("client")[0]
        return layout

    def host_names(self):
        """Every part that needs a host of its own, and the client."""
        return ["haproxy", *(e.name for e in self.nodes + self.redis + self.sentinels),
                "client"]

    @staticmethod
    def free(nodes=3, prefix=None, replicas=2):
        """The standard shape on a /24 of its own, 127.x.y.0 with x and y chosen at random
        (unless `prefix` says "127.x.y"), and on each address a port the kernel says is free:
        for tests and benchmarks that must not meet a `make cluster` or each other."""
        if prefix is None:
            prefix = f"127.{random.randint(100, 254)}.{random.randint(1, 254)}"
        layout = Layout.standard(nodes, prefix, replicas)
        taken = set()
        for e in layout.endpoints():
            e.port = free_port(e.addr)
            while (e.addr, e.port) in taken:  # HAProxy and its stats share an address
                e.port = free_port(e.addr)
            taken.add((e.addr, e.port))
        return layout

    def endpoints(self):
        return [self.haproxy, self.stats, *self.nodes, *self.redis, *self.sentinels]

    def to_json(self):
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d):
        one = lambda e: Endpoint(**e)  # noqa: E731
        return Layout(one(d["haproxy"]), one(d["stats"]), [one(e) for e in d["nodes"]],
                      [one(e) for e in d["redis"]], [one(e) for e in d["sentinels"]],
                      d.get("client_ns", ""))


def free_port(addr):
    """A port nothing listens on at `addr` right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


@dataclasses.dataclass
class Settings:
    """Timings and options; the defaults are `make cluster`'s."""
    # Sentinel (docs/scale-out.md says why each): how long without an answer before the
    # primary is down, for the first Sentinel; each next one waits down_after_step_ms longer,
    # so that they see a dead primary one after another and do not split the vote. How often a
    # Sentinel PINGs every instance and asks it for INFO (SENTINEL DEBUG ping-period and
    # info-period, set at each start: they are not kept in the config). A failover that stalls
    # is abandoned after failover_timeout_ms. Two of the three must agree that the primary is
    # down.
    down_after_ms: int = 500
    down_after_step_ms: int = 100
    sentinel_ping_period_ms: int = 250
    sentinel_info_period_ms: int = 1000
    failover_timeout_ms: int = 5000
    quorum: int = 2
    # spoold: /healthz fails this long on SIGTERM before the node stops accepting; a post is
    # acknowledged once this many replicas have it, waiting at most replica_timeout_s.
    drain_delay_s: float = 3.0
    store_replicas: int = 1
    replica_timeout_s: float = 1.0
    spoold_args: list = dataclasses.field(default_factory=list)


# ----------------------------------------------------------------------------------------------
# Processes
# ----------------------------------------------------------------------------------------------

def _start_time(pid):
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # exited, not yet reaped: as good as gone
        return None
    return int(fields[19])


class Process:
    """One background process of the fleet, tracked by its pid file."""

    def __init__(self, name, state_dir):
        self.name = name
        self.pidfile = os.path.join(state_dir, "pids", f"{name}.pid")
        self.log = os.path.join(state_dir, "logs", f"{name}.log")
        self.popen = None  # set when this Python process started it (reaped on exit)

    def start(self, cmd, cwd, ns=""):
        """Starts `cmd`, inside network namespace `ns` if one is named (`ip netns exec`
        replaces itself with the command: the pid is the command's)."""
        if self.pid() is not None:
            raise FleetError(f"{self.name} is already running (pid {self.pid()})")
        if ns:
            cmd = ["ip", "netns", "exec", ns, *cmd]
        with open(self.log, "ab") as log:
            log.write(f"==> {time.strftime('%F %T')} {' '.join(cmd)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        started = _start_time(self.popen.pid)
        with open(self.pidfile + ".tmp", "w") as f:
            f.write(f"{self.popen.pid} {started}\n")
        os.replace(self.pidfile + ".tmp", self.pidfile)

    def pid(self):
        """The pid if our process still runs, else None (a stale pid file is removed)."""
        try:
            with open(self.pidfile) as f:
                pid, started = f.read().split()
            pid = int(pid)
        except (OSError, ValueError):
            return None
        if self.popen is not None and self.popen.pid == pid and self.popen.poll() is not None:
            alive = False
        else:
            alive = str(_start_time(pid)) == started
        if not alive:
            try:
                os.unlink(self.pidfile)
            except FileNotFoundError:
                pass
            return None
        return pid

    def send(self, sig):
        pid = self.pid()
        if pid is None:
            raise FleetError(f"{self.name} is not running")
        os.kill(pid, sig)

    def wait_exit(self, timeout):
        wait_for(lambda: self.pid() is None, timeout, f"{self.name} to exit (log: {self.log})")

    def stop(self, timeout, sig=signal.SIGTERM):
        """sig, then SIGKILL if it has not exited within `timeout` s. True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        os.kill(pid, sig)
        try:
            self.wait_exit(timeout)
        except FleetError:
            if self.pid() is not None:
                os.kill(pid, signal.SIGKILL)
                self.wait_exit(10)
        return True


# ----------------------------------------------------------------------------------------------
# The fleet
# ----------------------------------------------------------------------------------------------

def _template(name):
    with open(os.path.join(HERE, name)) as f:
        return string.Template(f.read())


def _find(program):
    path = shutil.which(program) or f"/usr/bin/{program}"
    if not os.access(path, os.X_OK):
        raise FleetError(f"{program} is not installed: run scripts/install-deps.sh")
    return path


class Fleet:
    def __init__(self, state_dir, layout, spoold, site=None, settings=None):
        self.dir = os.path.abspath(state_dir)
        self.layout = layout
        self.spoold = os.path.abspath(spoold)
        self.site = os.path.abspath(site or os.path.join(REPO, "server", "site"))
        self.settings = settings or Settings()
        self.procs = {}

    @staticmethod
    def attach(state_dir):
        """The fleet whose state is in `state_dir` (made by start())."""
        path = os.path.join(state_dir, "state.json")
        try:
            with open(path) as f:
                d = json.load(f)
        except FileNotFoundError:
            raise FleetError(f"no fleet state in {state_dir} (not started there?)") from None
        return Fleet(state_dir, Layout.from_json(d["layout"]), d["spoold"], d["site"],
                     Settings(**d["settings"]))

    # -- paths and addresses --

    @property
    def url(self):
        return f"http://{self.layout.haproxy.text}/"

    @property
    def stats_url(self):
        return f"http://{self.layout.stats.text}/"

    def store_spec(self):
        sentinels = ",".join(s.text for s in self.layout.sentinels)
        return f"redis-sentinel://{sentinels}/{MASTER_NAME}"

    def proc(self, name):
        if name not in self.procs:
            self.procs[name] = Process(name, self.dir)
        return self.procs[name]

    def _path(self, *parts):
        return os.path.join(self.dir, *parts)

    def _node(self, which):
        """A node by index or name."""
        if isinstance(which, int):
            return self.layout.nodes[which]
        for n in self.layout.nodes:
            if n.name == which:
                return n
        raise FleetError(f"no node {which!r}")

    def _redis(self, name):
        for r in self.layout.redis:
            if r.name == name:
                return r
        raise FleetError(f"no Redis instance {name!r}")

    # -- the whole fleet --

    def running(self):
        """Names of the fleet's processes that run now."""
        names = [e.name for e in self.layout.endpoints() if e.name != "stats"] + [LAB_PROCESS]
        return [name for name in names if self.proc(name).pid() is not None]

    def prepare(self):
        """Makes the state directory and writes state.json and every config into it."""
        parts = [name for name in self.running() if name != LAB_PROCESS]
        if parts:
            raise FleetError(f"a fleet already runs from {self.dir}: {', '.join(parts)}"
                             " (stop it first)")
        for sub in ("conf", "data", "logs", "pids"):
            os.makedirs(self._path(sub), exist_ok=True)
        with open(self._path("state.json"), "w") as f:
            json.dump({"layout": self.layout.to_json(), "spoold": self.spoold, "site": self.site,
                       "settings": dataclasses.asdict(self.settings)}, f, indent=2)
        primary, *replicas = self.layout.redis
        self._write_redis_conf(primary, None)
        for replica in replicas:
            self._write_redis_conf(replica, primary)
        for s in self.layout.sentinels:
            self._write_sentinel_conf(s, primary)
        self._write_haproxy_conf()

    def start_store(self, timeout=60):
        """Starts the Redis primary, its replicas and the Sentinels, and waits until the
        replicas are in sync and the Sentinels know each other (prepare() first)."""
        primary, *replicas = self.layout.redis
        self.start_redis(primary.name, timeout)
        for replica in replicas:
            self.start_redis(replica.name, timeout)
        for replica in replicas:
            self.wait_replica_online(replica.name, timeout)
        for s in self.layout.sentinels:
            self.start_sentinel(s.name, timeout)
        self.wait_sentinels_agree(timeout)

    def start(self, timeout=60):
        """Writes the configs, starts every part in dependency order and returns once HAProxy
        reports every node UP and answers a GET. On failure stops what it started."""
        self.prepare()
        try:
            self.start_store(timeout)
            for i in range(len(self.layout.nodes)):
                self.start_node(i, timeout, wait_up=False)
            self.start_haproxy(timeout)
            for n in self.layout.nodes:
                for backend in ("spoold", "guestbook"):
                    self.wait_node_state(n.name, ("UP",), timeout, backend)
            wait_for(lambda: http_status(self.url) == 200, timeout, f"GET {self.url} to answer 200")
        except BaseException:
            self.stop()
            raise

    def stop(self, timeout=30):
        """Stops every process of the fleet that runs (SIGTERM, then SIGKILL after `timeout`),
        the balancer first and the store last. Returns the names stopped."""
        stopped = []
        for group in ([self.layout.haproxy.name], [n.name for n in self.layout.nodes],
                      [s.name for s in self.layout.sentinels],
                      [r.name for r in self.layout.redis], [LAB_PROCESS]):
            procs = [self.proc(name) for name in group if self.proc(name).pid() is not None]
            for p in procs:  # signal the whole group first: nodes drain at the same time
                p.send(signal.SIGCONT)  # a stopped process cannot act on SIGTERM
                p.send(signal.SIGTERM)
            for p in procs:
                p.stop(timeout)  # waits; SIGKILL after timeout
                stopped.append(p.name)
        return stopped

    # -- spoold nodes --

    def start_node(self, which, timeout=30, wait_up=True):
        """Starts a node; waits for its listening line, and (wait_up) for HAProxy to mark it UP
        in both backends."""
        n = self._node(which)
        s = self.settings
        # HAProxy is a trusted peer: its idle connections are closed by HAProxy, never by the
        # node (haproxy.cfg.in, http-reuse).
        cmd = [self.spoold, "--bind", n.addr, "--port", str(n.port), "--root", self.site,
               "--store", self.store_spec(), "--node-name", n.name,
               "--store-replicas", str(s.store_replicas),
               "--store-replicas-timeout", str(s.replica_timeout_s),
               "--drain-delay", str(s.drain_delay_s),
               "--trust", self.layout.haproxy.addr, "--trust-idle-timeout", "0",
               *s.spoold_args]
        p = self.proc(n.name)
        mark = os.path.getsize(p.log) if os.path.exists(p.log) else 0
        p.start(cmd, self.dir, n.ns)
        listening = f"spoold: listening on http://{n.text}/"
        wait_for(lambda: self._log_has(p, mark, listening), timeout,
                 f"{n.name} to listen on {n.text} (log: {p.log})")
        if wait_up:
            for backend in ("spoold", "guestbook"):
                self.wait_node_state(n.name, ("UP",), timeout, backend)

    def _log_has(self, p, offset, text):
        if p.pid() is None:
            raise FleetError(f"{p.name} exited; its log {p.log} ends:\n{tail(p.log)}")
        with open(p.log, "rb") as f:
            f.seek(offset)
            return text.encode() in f.read()

    def stop_node(self, which, timeout=60):
        """SIGTERM (spoold drains for drain_delay_s, then finishes in-flight requests); waits
        for the process to exit."""
        n = self._node(which)
        self.proc(n.name).send(signal.SIGTERM)
        self.proc(n.name).wait_exit(timeout)

    def kill_node(self, which):
        n = self._node(which)
        self.proc(n.name).send(signal.SIGKILL)
        self.proc(n.name).wait_exit(10)

    def pause_node(self, which):
        self.proc(self._node(which).name).send(signal.SIGSTOP)

    def resume_node(self, which):
        self.proc(self._node(which).name).send(signal.SIGCONT)

    def rolling_restart(self, timeout=60, on_event=None):
        """Restarts every node in turn: SIGTERM, wait for HAProxy to take it out of rotation
        and for the process to exit, start it, wait for UP. on_event(name, what) is called at
        each step ("term", "down", "exited", "up")."""
        event = on_event or (lambda name, what: None)
        for n in self.layout.nodes:
            p = self.proc(n.name)
            p.send(signal.SIGTERM)
            event(n.name, "term")
            # While it drains, the health check fails and HAProxy stops sending it requests.
            self.wait_node_state(n.name, ("DOWN", "NOLB", "MAINT"), timeout)
            event(n.name, "down")
            p.wait_exit(timeout)
            event(n.name, "exited")
            self.start_node(n.name, timeout)
            event(n.name, "up")

    # -- HAProxy --

    def start_haproxy(self, timeout=30):
        p = self.proc("haproxy")
        cfg = self._path("conf", "haproxy.cfg")
        check = subprocess.run([_find("haproxy"), "-c", "-q", "-f", cfg], capture_output=True,
                               text=True)
        if check.returncode != 0:
            raise FleetError(f"haproxy -c rejects {cfg}:\n{check.stdout}{check.stderr}")
        p.start([_find("haproxy"), "-db", "-f", cfg], self.dir, self.layout.haproxy.ns)
        wait_for(lambda: self.node_states(), timeout, f"HAProxy's stats on {self.stats_url} "
                 f"(log: {p.log})")

    def node_states(self, backend="spoold"):
        """{node name: HAProxy's status of it ("UP", "DOWN", "UP 1/2", "NOLB", "MAINT", ...)}
        in `backend` ("spoold": every request; "guestbook": the nodes that reach the store),
        from the stats page's CSV."""
        with urllib.request.urlopen(self.stats_url + ";csv", timeout=5) as r:
            text = r.read().decode()
        lines = text.splitlines()
        header = lines[0].lstrip("# ").split(",")
        out = {}
        for line in lines[1:]:
            row = dict(zip(header, line.split(",")))
            if row.get("pxname") == backend and row.get("svname") not in ("FRONTEND", "BACKEND"):
                out[row["svname"]] = row["status"]
        return out

    def wait_node_state(self, name, states, timeout=30, backend="spoold"):
        """Waits until HAProxy's status of node `name` in `backend` is one of `states`."""
        wait_for(lambda: self.node_states(backend).get(name) in states, timeout,
                 f"HAProxy to report {name} as {'/'.join(states)} in backend {backend}",
                 interval=0.02)

    # -- Redis and Sentinel --

    def start_redis(self, name, timeout=30):
        r = self._redis(name)
        p = self.proc(name)
        p.start([_find("redis-server"), self._path("conf", f"{name}.conf")], self.dir, r.ns)
        wait_for(lambda: self._answers_ping(p, r), timeout, f"{name} to answer PING (log: {p.log})")

    def _answers_ping(self, p, e):
        if p.pid() is None:
            raise FleetError(f"{p.name} exited; its log {p.log} ends:\n{tail(p.log)}")
        try:
            return redis_command(e.addr, e.port, "PING") == "PONG"
        except RespError:  # LOADING while it reads its AOF
            return False

    def kill_redis(self, name):
        self.proc(name).send(signal.SIGKILL)
        self.proc(name).wait_exit(10)

    def start_sentinel(self, name, timeout=30):
        s = next(e for e in self.layout.sentinels if e.name == name)
        p = self.proc(name)
        p.start([_find("redis-sentinel"), self._path("conf", f"{name}.conf")], self.dir, s.ns)
        wait_for(lambda: self._answers_ping(p, s), timeout, f"{name} to answer PING (log: {p.log})")
        # A Sentinel PINGs each instance every min(down-after, ping-period) and counts a new
        # connection (to a primary it has just switched to) as unanswered since it was made:
        # with the default ping-period of 1 s, a down-after of 1 s or less marks a new primary
        # down before its first PING is sent, and the Sentinels fail it over too. The period
        # also bounds how old a replica's INFO may be for it to be promoted (5 periods, against
        # an INFO a second during a failover): 250 ms is as short as that allows. A failover
        # waits for the Sentinel's next INFO of the promoted replica; asked once a second all
        # the time (not every 10 s), that INFO comes sooner after the promotion.
        answer = redis_command(s.addr, s.port, "SENTINEL", "DEBUG",
                               "ping-period", self.settings.sentinel_ping_period_ms,
                               "info-period", self.settings.sentinel_info_period_ms)
        if answer != "OK":
            raise FleetError(f"{name}: SENTINEL DEBUG: {answer!r}")

    def primary(self):
        """The name of the Redis instance the Sentinels report as primary (the first that
        answers), or None if none does."""
        for s in self.layout.sentinels:
            try:
                reply = redis_command(s.addr, s.port, "SENTINEL", "get-master-addr-by-name",
                                      MASTER_NAME)
            except (OSError, RespError):
                continue
            if reply:
                addr, port = reply[0].decode(), int(reply[1])
                for r in self.layout.redis:
                    if (r.addr, r.port) == (addr, port):
                        return r.name
        return None

    def role(self, name):
        """"master", "slave" or None (not answering) for a Redis instance."""
        r = self._redis(name)
        try:
            reply = redis_command(r.addr, r.port, "ROLE")
        except (OSError, RespError):
            return None
        return reply[0].decode() if reply else None

    def wait_sentinels_agree(self, timeout=30, replicas=None):
        """Waits until every Sentinel knows the others and sees `replicas` replicas healthy
        (default: every Redis instance that runs, but the primary), so that a failover can be
        voted on and has a replica to promote. The Sentinels find each other through the
        primary's hello channel, every 2 s."""
        want_sentinels = len(self.layout.sentinels) - 1
        if replicas is None:
            replicas = sum(1 for r in self.layout.redis if self.proc(r.name).pid()) - 1
        want_replicas = replicas

        def as_dict(flat):
            return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}

        def agreed():
            for s in self.layout.sentinels:
                info = as_dict(redis_command(s.addr, s.port, "SENTINEL", "master", MASTER_NAME))
                if int(info["num-other-sentinels"]) < want_sentinels:
                    return False
                replicas = [as_dict(r) for r in
                            redis_command(s.addr, s.port, "SENTINEL", "replicas", MASTER_NAME)]
                healthy = [r for r in replicas if r.get("flags") == "slave"
                           and r.get("master-link-status") == "ok"]
                if len(healthy) < want_replicas:
                    return False
            return True

        wait_for(agreed, timeout, f"the Sentinels to know each other and see {want_replicas} "
                 "replica(s) healthy")

    def wait_for_new_primary(self, old, timeout=60):
        """Waits until the Sentinels report a primary other than `old` and that instance says
        it is a master; returns its name."""
        def promoted():
            now = self.primary()
            return now if now not in (None, old) and self.role(now) == "master" else None
        return wait_for(promoted, timeout, f"the Sentinels to promote a replica in place of {old}")

    def wait_replica_online(self, name, timeout=60):
        """Waits until `name` is a replica whose link to the primary is up and in sync."""
        r = self._redis(name)

        def online():
            info = redis_info(r.addr, r.port)
            return (info.get("role") == "slave" and info.get("master_link_status") == "up"
                    and info.get("master_sync_in_progress") == "0")
        wait_for(online, timeout, f"{name} to be an online replica")

    # -- configs --

    def _write(self, name, text):
        with open(self._path("conf", name), "w") as f:
            f.write(text)

    def _write_redis_conf(self, r, primary):
        data = self._path("data", r.name)
        os.makedirs(data, exist_ok=True)
        replicaof = f"replicaof {primary.addr} {primary.port}" if primary else ""
        self._write(f"{r.name}.conf", _template("redis.conf.in").substitute(
            addr=r.addr, port=r.port, data_dir=data, log=self._path("logs", f"{r.name}.log"),
            replicaof=replicaof))

    def _write_sentinel_conf(self, s, primary):
        data = self._path("data", s.name)
        os.makedirs(data, exist_ok=True)
        st = self.settings
        self._write(f"{s.name}.conf", _template("sentinel.conf.in").substitute(
            addr=s.addr, port=s.port, data_dir=data, log=self._path("logs", f"{s.name}.log"),
            master=MASTER_NAME, primary_addr=primary.addr, primary_port=primary.port,
            quorum=st.quorum,
            down_after_ms=st.down_after_ms + st.down_after_step_ms * self.layout.sentinels.index(s),
            failover_timeout_ms=st.failover_timeout_ms))

    def _write_haproxy_conf(self):
        servers = "\n".join(f"    server {n.name} {n.text} cookie {n.name}"
                            for n in self.layout.nodes)
        h, st = self.layout.haproxy, self.layout.stats
        self._write("haproxy.cfg", _template("haproxy.cfg.in").substitute(
            haproxy_addr=h.addr, haproxy_port=h.port, stats_addr=st.addr, stats_port=st.port,
            servers=servers))

    # -- reporting --

    def status_lines(self):
        lines = []
        try:
            states = self.node_states()
        except OSError:
            states = {}
        primary = self.primary()
        for e in self.layout.endpoints():
            if e.name == "stats":
                continue
            pid = self.proc(e.name).pid()
            what = f"pid {pid}" if pid else "not running"
            if e in self.layout.nodes:
                what += f", HAProxy: {states.get(e.name, '?')}"
            if e in self.layout.redis and pid:
                what += f", role {self.role(e.name)}"
                if e.name == primary:
                    what += " (the Sentinels' primary)"
            lines.append(f"  {e.name:10} {e.text:22} {what}")
        return lines


def request(addr, port, method, path, body=None, timeout=30):
    """One HTTP/1.1 request on a connection of its own ("Connection: close"; a body is sent as
    a form). Returns (status, headers, body). Raises OSError or http.client.HTTPException."""
    conn = http.client.HTTPConnection(addr, port, timeout=timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def http_status(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def tail(path, lines=20):
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-lines:]).decode(errors="replace")
    except OSError:
        return ""


# ----------------------------------------------------------------------------------------------
# The command line (make cluster, cluster-down, cluster-status, cluster-rolling-restart)
# ----------------------------------------------------------------------------------------------

def main(argv=None):
    parser = argparse.ArgumentParser(description="A spoold fleet on one machine.")
    parser.add_argument("command", choices=("up", "down", "status", "rolling-restart", "exec",
                                            "lab"))
    parser.add_argument("--dir", default=os.path.join(HERE, "run"),
                        help="state directory: configs, data, logs, pid files "
                             "(default cluster/run)")
    parser.add_argument("--nodes", type=int, default=3, help="spoold nodes, 1 to 9 (up; default 3)")
    parser.add_argument("--replicas", type=int, default=2,
                        help="Redis replicas of the primary, 1 to 8 (up; default 2)")
    parser.add_argument("--netns", action="store_true",
                        help="every part in a network namespace of its own (up; needs root)")
    parser.add_argument("--spoold", default=os.path.join(REPO, "build", "release", "server",
                                                         "spoold"), help="the spoold binary (up)")
    parser.add_argument("--site", default=None, help="static files (up; default server/site)")
    parser.add_argument("--prefix", default="127.0.0",
                        help="the 127.x.y of every address (up; default 127.0.0)")
    parser.add_argument("--free-ports", action="store_true",
                        help="ports the kernel says are free instead of 8080, 8404, 6379, 26379")
    parser.add_argument("--hosts", default="", help=argparse.SUPPRESS)  # lab: host names
    argv = list(sys.argv[1:] if argv is None else argv)
    command = []  # exec: what follows "--"
    if "--" in argv:
        command = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    args = parser.parse_args(argv)
    try:
        if args.command == "lab":
            return run_lab(args.dir, args.hosts.split(","))
        if args.command == "up":
            if not 1 <= args.nodes <= 9:
                parser.error("--nodes must be from 1 to 9 (127.0.0.11 to .19)")
            if not 1 <= args.replicas <= 8:
                parser.error("--replicas must be from 1 to 8 (127.0.0.22 to .29)")
            if not os.access(args.spoold, os.X_OK):
                parser.error(f"no spoold binary at {args.spoold} (make build)")
            parts = args.prefix.split(".")
            if len(parts) != 3 or parts[0] != "127" or not all(
                    p.isdigit() and 0 <= int(p) <= 255 for p in parts):
                parser.error("--prefix must be 127.X.Y (a loopback /24)")
            if args.netns:
                f = up_in_namespaces(args)
            else:
                layout = (Layout.free(args.nodes, args.prefix, args.replicas) if args.free_ports
                          else Layout.standard(args.nodes, args.prefix, args.replicas))
                f = Fleet(args.dir, layout, args.spoold, args.site)
                f.start()
            print(f"fleet: up ({args.nodes} spoold nodes on Redis with {args.replicas} "
                  f"replica(s) and Sentinel, behind HAProxy)")
            print(f"  site:      {f.url}  (guestbook {f.url}guestbook, dashboard {f.url}dashboard)")
            print(f"  HAProxy:   {f.stats_url}  (stats)")
            print(f"  store:     {f.store_spec()}")
            print(f"  logs:      {f._path('logs')}/")
            if f.layout.client_ns:
                print(f"  network:   a namespace per part; a client runs in {f.layout.client_ns}: "
                      f"{sys.argv[0]} exec -- curl {f.url}")
            print("\n".join(f.status_lines()))
            print("  stop with: make cluster-down")
            return 0
        f = Fleet.attach(args.dir)
        if args.command == "down":
            stopped = f.stop()
            print(f"fleet: stopped {', '.join(stopped) if stopped else 'nothing (none running)'}")
            return 0
        if f.layout.client_ns:
            netns.enter(f.layout.client_ns)  # the fleet's addresses are reachable from there
        if args.command == "status":
            running = f.running()
            parts = len(f.layout.endpoints()) - 1 + (1 if f.layout.client_ns else 0)
            print(f"fleet in {f.dir}: {len(running)} of {parts} processes running; {f.url}")
            print("\n".join(f.status_lines()))
            return 0
        if args.command == "exec":
            if not command:
                parser.error("exec needs a command: fleet.py exec -- CMD ARGS...")
            os.execvp(command[0], command)
        f.rolling_restart(on_event=lambda name, what: print(f"  {name}: {what}", flush=True))
        print("fleet: every node restarted")
        return 0
    except (FleetError, netns.NetnsError) as e:
        print(f"fleet: {e}", file=sys.stderr)
        return 1


def up_in_namespaces(args):
    """`up --netns`: a process of its own (`fleet.py lab`, which outlives this one) makes a
    namespace per part and holds it until `down` stops it; then the fleet starts in them, and
    this process talks to it from the client's namespace."""
    layout = Layout.in_lab(lambda name: ("", ""), args.nodes, args.replicas)
    f = Fleet(args.dir, layout, args.spoold, args.site)
    if f.running():
        raise FleetError(f"a fleet already runs from {f.dir}: {', '.join(f.running())}"
                         " (stop it first)")
    for sub in ("logs", "pids"):
        os.makedirs(f._path(sub), exist_ok=True)
    lab_file = f._path("lab.json")
    if os.path.exists(lab_file):
        os.unlink(lab_file)
    keeper = f.proc(LAB_PROCESS)
    keeper.start([sys.executable, os.path.abspath(__file__), "lab", "--dir", f.dir,
                  "--hosts", ",".join(layout.host_names())], f.dir)
    try:
        def hosts():
            if keeper.pid() is None:
                raise FleetError(f"the network lab exited; its log {keeper.log} ends:\n"
                                 f"{tail(keeper.log)}")
            with open(lab_file) as lf:
                return json.load(lf)
        made = wait_for(lambda: os.path.exists(lab_file) and hosts(), 60,
                        f"the network namespaces (log: {keeper.log})")
        f.layout = Layout.in_lab(lambda name: made[name], args.nodes, args.replicas)
        netns.enter(f.layout.client_ns)
        f.start()
    except BaseException:
        f.stop()
        raise
    return f


def run_lab(state_dir, names):
    """`fleet.py lab`: makes a host per name, checks that none can reach beyond the lab, writes
    {name: [namespace, address]} to lab.json and holds the namespaces until SIGTERM or SIGINT
    (netns.Lab removes them then)."""
    signal.signal(signal.SIGINT, lambda signum, frame: sys.exit(0))
    with netns.Lab("fleet") as lab:
        made = {}
        for name in names:
            h = lab.add_host(name)
            made[name] = [h.ns, h.addr]
        lab.check_isolated()
        path = os.path.join(state_dir, "lab.json")
        with open(path + ".tmp", "w") as f:
            json.dump(made, f)
        os.replace(path + ".tmp", path)
        print(f"netlab: {len(made)} namespaces, {lab.base}-*", flush=True)
        while True:
            signal.pause()


if __name__ == "__main__":
    sys.exit(main())
