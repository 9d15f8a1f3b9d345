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
    old = f.store.primary()                  # the store: Redis and Sentinel (store.py)
    f.store.kill_redis(old)                  # kill -9 the primary
    new = f.store.wait_for_new_primary(old)  # Sentinel promoted a replica
    f.store.start_redis(old); f.store.wait_replica_online(old)
    f.balancer.node_states()                 # the balancer: HAProxy's view (balancer.py)
    f.rolling_restart()                      # SIGTERM, wait, start, wait UP: node by node
    f.stop()                                 # also fleet.Fleet.attach(state_dir).stop()

The parts, a module each: layout.py (where each part listens, the timings), processes.py (pid
files, start and stop), configs.py (the config files from the templates), store.py, balancer.py;
wire.py holds the Redis client, the HTTP request and the polling wait they share with the tests
and benchmarks. cluster/README.md describes the layout and this interface; docs/scale-out.md
every setting.
"""

import argparse
import dataclasses
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import configs  # noqa: E402
import netns  # noqa: E402
import wire  # noqa: E402
from balancer import Balancer  # noqa: E402
from layout import Endpoint, Layout, Settings  # noqa: E402,F401  (the fleet's interface)
from processes import FleetError, Processes, tail, wait_for  # noqa: E402,F401
from store import Store  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The process that holds a fleet's network namespaces (`up --netns`): they are removed when it
# stops (cluster/netns.py), after every other part of the fleet.
LAB_PROCESS = "netlab"


class Fleet:
    """The spoold nodes, and the parts they stand between: the store (store.py) behind them,
    the balancer (balancer.py) in front, every process of the three tracked by `processes`
    (processes.py) in the state directory."""

    def __init__(self, state_dir, layout, spoold, site=None, settings=None):
        self.dir = os.path.abspath(state_dir)
        self.layout = layout
        self.spoold = os.path.abspath(spoold)
        self.site = os.path.abspath(site or os.path.join(REPO, "server", "site"))
        self.settings = settings or Settings()
        self.processes = Processes(self.dir)
        self.store = Store(layout, self.settings, self.processes, self.dir)
        self.balancer = Balancer(layout, self.processes, self.dir)

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

    @property
    def url(self):
        return self.balancer.url

    def proc(self, name):
        """The process of part `name` (processes.Process)."""
        return self.processes[name]

    def path(self, *parts):
        """A path inside the state directory."""
        return os.path.join(self.dir, *parts)

    def node(self, which):
        """A node's Endpoint, by index or name."""
        if isinstance(which, int):
            return self.layout.nodes[which]
        for n in self.layout.nodes:
            if n.name == which:
                return n
        raise FleetError(f"no node {which!r}")

    # -- the whole fleet --

    def running(self):
        """Names of the fleet's processes that run now."""
        names = [e.name for e in self.layout.endpoints() if e.name != "stats"] + [LAB_PROCESS]
        return self.processes.running(names)

    def prepare(self):
        """Makes the state directory and writes state.json and every config into it."""
        parts = [name for name in self.running() if name != LAB_PROCESS]
        if parts:
            raise FleetError(f"a fleet already runs from {self.dir}: {', '.join(parts)}"
                             " (stop it first)")
        for sub in ("conf", "data", "logs", "pids"):
            os.makedirs(self.path(sub), exist_ok=True)
        with open(self.path("state.json"), "w") as f:
            json.dump({"layout": self.layout.to_json(), "spoold": self.spoold, "site": self.site,
                       "settings": dataclasses.asdict(self.settings)}, f, indent=2)
        configs.write_all(self.dir, self.layout, self.settings)

    def start(self, timeout=60):
        """Writes the configs, starts every part in dependency order and returns once HAProxy
        reports every node UP and answers a GET. On failure stops what it started."""
        self.prepare()
        try:
            self.store.start(timeout)
            for i in range(len(self.layout.nodes)):
                self.start_node(i, timeout, wait_up=False)
            self.balancer.start(timeout)
            for n in self.layout.nodes:
                self.balancer.wait_up(n.name, timeout)
            wait_for(lambda: wire.http_status(self.url) == 200, timeout,
                     f"GET {self.url} to answer 200")
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
            procs = [self.processes[name] for name in self.processes.running(group)]
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
        n = self.node(which)
        s = self.settings
        # HAProxy is a trusted peer: its idle connections are closed by HAProxy, never by the
        # node (haproxy.cfg.in, http-reuse).
        cmd = [self.spoold, "--bind", n.addr, "--port", str(n.port), "--root", self.site,
               "--store", self.store.spec(), "--node-name", n.name,
               "--store-replicas", str(s.store_replicas),
               "--store-replicas-timeout", str(s.replica_timeout_s),
               "--drain-delay", str(s.drain_delay_s),
               "--trust", self.layout.haproxy.addr, "--trust-idle-timeout", "0",
               *s.spoold_args]
        p = self.processes[n.name]
        mark = os.path.getsize(p.log) if os.path.exists(p.log) else 0
        p.start(cmd, self.dir, n.ns)
        listening = f"spoold: listening on http://{n.text}/"
        wait_for(lambda: self._log_has(p, mark, listening), timeout,
                 f"{n.name} to listen on {n.text} (log: {p.log})")
        if wait_up:
            self.balancer.wait_up(n.name, timeout)

    @staticmethod
    def _log_has(p, offset, text):
        p.check_running()
        with open(p.log, "rb") as f:
            f.seek(offset)
            return text.encode() in f.read()

    def stop_node(self, which, timeout=60):
        """SIGTERM (spoold drains for drain_delay_s, then finishes in-flight requests); waits
        for the process to exit."""
        p = self.processes[self.node(which).name]
        p.send(signal.SIGTERM)
        p.wait_exit(timeout)

    def kill_node(self, which):
        """SIGKILL; waits for the exit."""
        self.processes[self.node(which).name].kill()

    def pause_node(self, which):
        self.processes[self.node(which).name].send(signal.SIGSTOP)

    def resume_node(self, which):
        self.processes[self.node(which).name].send(signal.SIGCONT)

    def rolling_restart(self, timeout=60, on_event=None):
        """Restarts every node in turn: SIGTERM, wait for HAProxy to take it out of rotation
        and for the process to exit, start it, wait for UP. on_event(name, what) is called at
        each step ("term", "down", "exited", "up")."""
        event = on_event or (lambda name, what: None)
        for n in self.layout.nodes:
            p = self.processes[n.name]
            p.send(signal.SIGTERM)
            event(n.name, "term")
            # While it drains, the health check fails and HAProxy stops sending it requests.
            self.balancer.wait_node_state(n.name, ("DOWN", "NOLB", "MAINT"), timeout)
            event(n.name, "down")
            p.wait_exit(timeout)
            event(n.name, "exited")
            self.start_node(n.name, timeout)
            event(n.name, "up")

    # -- reporting --

    def status_lines(self):
        lines = []
        try:
            states = self.balancer.node_states()
        except OSError:
            states = {}
        primary = self.store.primary()
        for e in self.layout.endpoints():
            if e.name == "stats":
                continue
            pid = self.processes[e.name].pid()
            what = f"pid {pid}" if pid else "not running"
            if e in self.layout.nodes:
                what += f", HAProxy: {states.get(e.name, '?')}"
            if e in self.layout.redis and pid:
                what += f", role {self.store.role(e.name)}"
                if e.name == primary:
                    what += " (the Sentinels' primary)"
            lines.append(f"  {e.name:10} {e.text:22} {what}")
        return lines


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
            print(f"  HAProxy:   {f.balancer.stats_url}  (stats)")
            print(f"  store:     {f.store.spec()}")
            print(f"  logs:      {f.path('logs')}/")
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
        os.makedirs(f.path(sub), exist_ok=True)
    lab_file = f.path("lab.json")
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
        # The same state directory and processes, the parts now on the lab's hosts.
        f = Fleet(args.dir, Layout.in_lab(lambda name: made[name], args.nodes, args.replicas),
                  args.spoold, args.site)
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
