"""The fleet under load, every part on a network of its own, with parts killed, hung, cut off and
slowed one after another: no acknowledged post is lost or stored twice; a node killed or hung
and a rolling restart fail no request at all; a primary cut off with one node acknowledges no
post it cannot replicate; the other faults' failures stay inside a bounded window.

The fleet is cluster/fleet.py's (HAProxy keeping connections to the nodes alive, 3 spoold nodes
on redis-sentinel:// with --store-replicas 1, a Redis primary and two replicas with appendfsync
always, 3 Sentinels), each part in a network namespace of its own on a private bridge
(cluster/netns.py), and the load client in one more; no namespace has a route out, which is
checked before any load is sent, and every namespace is removed at the end, whatever happened.
The load client (threads, http.client) sends through HAProxy a mix of GET /, GET /guestbook and
POST /guestbook, each post with a unique remark and post key, and records every request and
every acknowledged (303) post. A post that fails is sent again later with the same key, as a
user would; a few acknowledged ones are sent again on purpose. One after another:

  1. kill -9 a node; once HAProxy has marked it down, start it again;
  2. SIGSTOP a node for 5 s, then SIGCONT (a hung machine);
  3. a partition: the primary and one node on one side; HAProxy, the other nodes, the replicas
     and the Sentinels on the other, until the Sentinels have promoted a replica and a while
     longer, with posts sent straight to the cut-off node meanwhile; then healed, and the old
     primary rejoins as a replica;
  4. one node cut off from Redis and the Sentinels, and from nothing else; then healed;
  5. 50 ms each way between the nodes and Redis (and the Sentinels) for 5 s;
  6. kill -9 the primary, never started again: a replica is promoted, the other confirms posts;
  7. a rolling SIGTERM restart of every node (each drains, exits, starts, comes back up).

Then it checks, and prints: every acknowledged post is in the final guestbook exactly once, on
the primary and on every replica; failures per phase; no failure at all after a node's kill or
hang, during the latency and during the rolling restart, and none outside the window of
WINDOW[fault] seconds after the other faults (a failed request counts at the time its answer,
or its error, came); the cut-off node acknowledged no post while it was cut off, and how many
posts were answered "may or may not have been stored"; HAProxy took the node cut off from the
store out of the guestbook's rotation while static files were still served through it, and put
it back after the heal; the latency phase's p99 per kind of request; for each fault, when
service was whole again. Release builds only (tests/server/CMakeLists.txt): it measures
nothing, but under a sanitizer the nodes are too slow for the balancer's 2 s health checks.

Needs root (network namespaces, nftables, iptables). Environment: SPOOLD (the binary),
SPOOLD_SITE (the demo site), SPOOL_NETDELAY (tests/tools/netdelay.c's binary); SPOOLD_KEEP_TMP=1
keeps the fleet's directory (configs, data, logs) and prints where.
"""

import collections
import http.client
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "cluster"))
import fleet  # noqa: E402
import netns  # noqa: E402
import wire  # noqa: E402

NODES = 3
REPLICAS = 2
WORKERS = 4
PACE_S = 0.02              # each worker's pause between requests: about 150 requests/s in all
REQUEST_TIMEOUT_S = 30
STEADY_S = 2.0             # load with no fault before, between and after the faults
RUN_LIMIT_S = 400          # the load stops by itself after this, whatever happens
PARTITION_HOLD_S = 3.0     # the partition lasts this long after the Sentinels' promotion
DELAY_MS = 50
DELAY_HOLD_S = 5.0
MAYBE = "may or may not have been stored"
# How long after each fault a failure is allowed (none after a node's kill or hang, during the
# latency, or during a rolling restart). A partition costs what the cut-off node was serving
# when it began (HAProxy waits `timeout server`, 10 s, for an answer on a connection it reused),
# posts until a replica is promoted on the majority side (Sentinel's down-after 0.5 s and the
# election), and posts the healed node sends to the old primary before it hears of the new one.
# A node cut off from the store fails the guestbook requests it holds until HAProxy's check
# takes it out of that rotation (its store calls time out after 1 s). The primary's kill costs
# posts until a replica is promoted, about 2 s; the bound leaves room for a loaded machine.
WINDOW = {"kill -9 node": 0.0, "SIGSTOP node": 0.0, "partition": 40.0, "store cut off": 20.0,
          "latency": 0.0, "kill -9 primary": 10.0, "rolling restart": 0.0}


def log(text):
    print(text, flush=True)


# --------------------------------------------------------------------------------------------
# The load
# --------------------------------------------------------------------------------------------

class Post:
    def __init__(self, run):
        self.key = uuid.uuid4().hex
        self.remark = f"{run}-{self.key[:12]}"
        self.attempts = 0


def form(post):
    return urllib.parse.urlencode({"guest-name": "fleet", "guest-remarks": post.remark,
                                   "post-key": post.key})


def send(addr, port, method, path, body=None):
    """(status, detail, headers): the status and what it means ("303", "503 maybe" for a post
    that may or may not have been stored, ...), or None and the exception's name."""
    try:
        status, headers, data = wire.request(addr, port, method, path, body, REQUEST_TIMEOUT_S)
    except (OSError, http.client.HTTPException) as e:
        return None, type(e).__name__, None
    detail = str(status)
    if status == 503 and MAYBE.encode() in data:
        detail += " maybe"
    return status, detail, headers


class Load:
    """WORKERS threads sending requests through HAProxy until stop() or RUN_LIMIT_S."""

    def __init__(self, addr, port, run, t0):
        self.addr, self.port, self.run = addr, port, run
        self.t0 = t0
        self.lock = threading.Lock()
        self.requests = []      # (start, end, kind, ok, detail), times relative to t0
        self.acked = {}         # remark -> post key, for every post answered 303
        self.unacked = {}       # remark -> Post, still failing when the load stopped
        self.replays = 0        # acknowledged posts sent again on purpose, answered 303
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._work, args=(i,), daemon=True)
                        for i in range(WORKERS)]

    def now(self):
        return time.monotonic() - self.t0

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(REQUEST_TIMEOUT_S + 10)

    def _post(self, post):
        post.attempts += 1
        return send(self.addr, self.port, "POST", "/guestbook", form(post))[:2]

    def _record(self, start, kind, status, detail, want):
        with self.lock:
            self.requests.append((start, self.now(), kind, status == want, detail))

    def _work(self, index):
        rng = random.Random(index)
        pending = None   # a post that failed, sent again at this worker's next post
        last_acked = None
        while not self.stopping.is_set() and self.now() < RUN_LIMIT_S:
            roll = rng.random()
            start = self.now()
            if roll < 0.45:
                status, detail, _ = send(self.addr, self.port, "GET", "/")
                self._record(start, "GET /", status, detail, 200)
            elif roll < 0.75:
                status, detail, _ = send(self.addr, self.port, "GET", "/guestbook")
                self._record(start, "GET /guestbook", status, detail, 200)
            elif roll < 0.77 and last_acked is not None:
                # The same form sent again after it was acknowledged: answered as the first.
                status, detail = self._post(last_acked)
                self._record(start, "POST (replay)", status, detail, 303)
                if status == 303:
                    with self.lock:
                        self.replays += 1
            else:
                post = pending or Post(self.run)
                status, detail = self._post(post)
                self._record(start, "POST", status, detail, 303)
                if status == 303:
                    with self.lock:
                        self.acked[post.remark] = post.key
                        self.unacked.pop(post.remark, None)
                    pending, last_acked = None, post
                else:
                    pending = post
                    with self.lock:
                        self.unacked[post.remark] = post
            time.sleep(PACE_S)  # pacing of the load (a rate), not synchronisation

    def in_phase(self, lo, hi):
        """Requests that ended in [lo, hi)."""
        with self.lock:
            return [r for r in self.requests if lo <= r[1] < hi]

    def failures(self, lo=None, hi=None):
        """Failed requests whose end lies in [lo, hi)."""
        with self.lock:
            return [r for r in self.requests if not r[3]
                    and (lo is None or r[1] >= lo) and (hi is None or r[1] < hi)]

    def acked_post_started_after(self, t):
        with self.lock:
            return any(r[2] == "POST" and r[3] and r[0] >= t for r in self.requests)


class DirectPoster:
    """One thread posting straight to one node (not through HAProxy), each post new, until
    stop(); records (start, end, detail) of each. Its posts count as unacknowledged unless
    answered 303 (then they are acknowledged like any other)."""

    def __init__(self, node, load):
        self.node, self.load = node, load
        self.results = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            post = Post(self.load.run)
            start = self.load.now()
            status, detail, _ = send(self.node.addr, self.node.port, "POST", "/guestbook",
                                     form(post))
            self.results.append((start, self.load.now(), detail))
            with self.load.lock:
                if status == 303:
                    self.load.acked[post.remark] = post.key
                else:
                    self.load.unacked[post.remark] = post
            self.stopping.wait(0.05)  # pacing, not synchronisation

    def stop(self):
        self.stopping.set()
        self.thread.join(REQUEST_TIMEOUT_S + 10)


# --------------------------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------------------------

class Scenario:
    def __init__(self, f, lab, load):
        self.f, self.lab, self.load = f, lab, load
        self.phases = []   # (name, start, end)
        self.faults = []   # dicts: kind, what, at, whole, events [(label, t)]
        self.problems = []
        self.notes = []    # lines for the report

    def phase(self, name):
        now = self.load.now()
        if self.phases:
            prev = self.phases[-1]
            self.phases[-1] = (prev[0], prev[1], now)
        self.phases.append((name, now, None))
        log(f"[{now:7.2f} s] {name}")

    def steady(self):
        # Load with no fault, so that each fault starts from a fleet that is whole.
        time.sleep(STEADY_S)

    def fault(self, kind, what):
        entry = {"kind": kind, "what": what, "at": self.load.now(), "events": []}
        self.faults.append(entry)
        return entry

    def event(self, entry, label):
        t = self.load.now()
        entry["events"].append((label, t - entry["at"]))
        log(f"[{t:7.2f} s]   {label} (+{t - entry['at']:.2f} s)")
        return t

    def host(self, endpoint):
        return self.lab.host(endpoint.name)

    def store_hosts(self):
        """The hosts of every Redis instance that runs and of every Sentinel."""
        f = self.f
        return [self.host(e) for e in f.layout.redis + f.layout.sentinels
                if f.proc(e.name).pid() is not None]

    def wait_acked_after(self, entry, t, label):
        fleet.wait_for(lambda: self.load.acked_post_started_after(t), 60, label)
        self.event(entry, label)

    def run(self):
        for step in (self.kill_node, self.hang_node, self.partition_primary, self.cut_off_store,
                     self.slow_store, self.kill_primary, self.rolling_restart):
            self.steady()
            step()
        self.phase("tail")
        self.steady()
        self.phase("end")

    def kill_node(self):
        f = self.f
        self.phase("kill -9 node")
        victim = f.layout.nodes[0].name
        e = self.fault("kill -9 node", f"kill -9 {victim}")
        f.kill_node(victim)
        f.balancer.wait_node_state(victim, ("DOWN",), 30)
        self.event(e, "HAProxy marked it DOWN")
        f.start_node(victim, 30)
        self.event(e, "restarted and UP again")
        e["whole"] = self.load.now()

    def hang_node(self):
        f = self.f
        self.phase("SIGSTOP node")
        victim = f.layout.nodes[1].name
        e = self.fault("SIGSTOP node", f"SIGSTOP {victim} for 5 s")
        f.pause_node(victim)
        time.sleep(5.0)  # the scenario: a machine that hangs for 5 s
        f.resume_node(victim)
        self.event(e, "SIGCONT")
        f.balancer.wait_node_state(victim, ("UP",), 30)
        self.event(e, "UP")
        e["whole"] = self.load.now()

    def partition_primary(self):
        f, lab, load = self.f, self.lab, self.load
        self.phase("partition")
        f.store.wait_sentinels_agree(30)  # both replicas ready to be promoted
        old = f.store.primary()
        assert old is not None, "the Sentinels report no primary before the partition"
        node = f.layout.nodes[0]
        minority = [self.host(f.store.redis(old)), self.host(node)]
        majority = [lab.host(h.name) for h in lab.hosts
                    if h.name not in (old, node.name, "client")]
        e = self.fault("partition", f"{old} and {node.name} cut off from HAProxy, the other "
                       "nodes, the replicas and the Sentinels")
        lab.partition(minority, majority)
        cut = self.event(e, "partitioned")
        direct = DirectPoster(node, load)
        try:
            new = f.store.wait_for_new_primary(old, 60)
            self.event(e, f"the Sentinels promoted {new} on the majority side")
            f.balancer.wait_node_state(node.name, ("DOWN",), 30)
            self.event(e, f"HAProxy marked {node.name} DOWN")
            self.wait_acked_after(e, cut, "posts acknowledged on the majority side")
            time.sleep(PARTITION_HOLD_S)  # the scenario: the partition lasts a while longer
        finally:
            # The heal removes the rules host by host: from its start the cut-off node may
            # reach the Sentinels and the new primary, and a post it acknowledges then is one
            # the majority side holds.
            healing = load.now()
            lab.heal()
            self.event(e, "healed")
            direct.stop()
        f.store.wait_replica_online(old, 90)
        self.event(e, f"{old} is an online replica of {new}")
        f.balancer.wait_node_state(node.name, ("UP",), 30)
        self.event(e, f"{node.name} UP again")
        rejoined = load.now()
        self.wait_acked_after(e, rejoined, "posts acknowledged after the old primary rejoined")
        e["whole"] = load.now()

        # Posts sent to the cut-off node after the partition began and answered before the
        # heal began reached only the old primary: none may be acknowledged.
        during = [r for r in direct.results if r[0] >= cut and r[1] < healing]
        kinds = collections.Counter(detail for _, _, detail in during)
        acked = kinds.get("303", 0)
        self.notes.append(f"posts straight to the cut-off {node.name} while cut off: "
                          f"{len(during)}, answered " + ", ".join(
                              f"{k} x{n}" for k, n in sorted(kinds.items())))
        if not during:
            self.problems.append(f"no post reached {node.name} while it was cut off")
        if acked:
            self.problems.append(f"{node.name}, cut off with the old primary, acknowledged "
                                 f"{acked} posts it could not replicate")

    def cut_off_store(self):
        f, lab, load = self.f, self.lab, self.load
        self.phase("store cut off")
        node = f.layout.nodes[1]
        e = self.fault("store cut off", f"{node.name} cut off from Redis and the Sentinels")
        lab.partition([self.host(node)], self.store_hosts())
        self.event(e, "partitioned")
        try:
            f.balancer.wait_node_state(node.name, ("DOWN",), 30, backend="guestbook")
            self.event(e, "HAProxy took it out of the guestbook's rotation")
            # Static files are still served through it.
            state = f.balancer.node_states("spoold").get(node.name, "")
            if not state.startswith("UP"):
                self.problems.append(f"{node.name}, cut off from the store only, is {state} "
                                     "for static files in HAProxy")
            served = None
            for _ in range(100):
                status, _, headers = send(f.layout.haproxy.addr, f.layout.haproxy.port, "GET",
                                          "/")
                if status == 200 and headers.get("Spoold-Node") == node.name:
                    served = True
                    break
            if not served:
                self.problems.append(f"no static request was served by {node.name} while "
                                     "it was cut off from the store")
            else:
                self.event(e, f"static files served through {node.name}")
        finally:
            lab.heal()
            healed = self.event(e, "healed")
        f.balancer.wait_node_state(node.name, ("UP",), 15, backend="guestbook")
        back = self.event(e, "back in the guestbook's rotation")
        self.notes.append(f"{node.name} back in the guestbook's rotation {back - healed:.2f} s "
                          "after the heal")
        e["whole"] = load.now()

    def slow_store(self):
        f, lab, load = self.f, self.lab, self.load
        self.phase("latency")
        e = self.fault("latency", f"{DELAY_MS} ms each way between the nodes and Redis and the "
                       "Sentinels")
        lab.delay([self.host(n) for n in f.layout.nodes], self.store_hosts(), DELAY_MS)
        start = self.event(e, "delayed")
        try:
            time.sleep(DELAY_HOLD_S)  # the scenario: a slow network for a while
        finally:
            end = load.now()
            lab.heal()
            self.event(e, "healed")
        e["whole"] = load.now()
        with load.lock:
            reqs = [r for r in load.requests if r[0] >= start and r[1] < end]
        by_kind = collections.defaultdict(list)
        for r in reqs:
            by_kind[r[2]].append(r[1] - r[0])
        parts = []
        for kind in sorted(by_kind):
            times = sorted(by_kind[kind])
            p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
            parts.append(f"{kind} p99 {p99 * 1000:.0f} ms ({len(times)})")
        self.notes.append(f"with {DELAY_MS} ms each way between the nodes and the store: "
                          + ", ".join(parts))

    def kill_primary(self):
        f, load = self.f, self.load
        self.phase("kill -9 primary")
        f.store.wait_sentinels_agree(30)  # both replicas ready
        old = f.store.primary()
        assert old is not None, "the Sentinels report no primary before the kill"
        e = self.fault("kill -9 primary", f"kill -9 the Redis primary ({old}), for good")
        f.store.kill_redis(old)
        killed = load.now()
        new = f.store.wait_for_new_primary(old, 60)
        self.event(e, f"Sentinel promoted {new}")
        self.wait_acked_after(e, killed, "posts acknowledged again")
        e["whole"] = load.now()
        reads = [r for r in load.in_phase(killed, e["whole"]) if r[2] == "GET /guestbook"]
        failed = [r for r in reads if not r[3]]
        self.notes.append(f"GET /guestbook while the primary was replaced: {len(reads)}, "
                          f"{len(failed)} failed")

    def rolling_restart(self):
        f = self.f
        self.phase("rolling restart")
        e = self.fault("rolling restart", "rolling SIGTERM restart of every node")
        f.rolling_restart(60, on_event=lambda name, what: self.event(e, f"{name}: {what}"))
        e["whole"] = self.load.now()


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

def guestbook_remarks(f, name):
    """The remarks of every entry in Redis instance `name`, oldest first."""
    r = f.store.redis(name)
    items = wire.redis_command(r.addr, r.port, "LRANGE", "guestbook_remarks", 0, -1, timeout=10)
    return [item.decode().split("\n", 1)[-1] for item in items]


def check(f, load, scenario):
    problems = list(scenario.problems)
    primary = f.store.primary()
    replicas = [r.name for r in f.layout.redis
                if r.name != primary and f.proc(r.name).pid() is not None]
    # The replicas have caught up once the lists are equally long (they only grow).
    fleet.wait_for(lambda: all(len(guestbook_remarks(f, r)) == len(guestbook_remarks(f, primary))
                               for r in replicas), 30,
                   "the replicas to hold as many entries as the primary")
    stored = guestbook_remarks(f, primary)
    mine = [r for r in stored if r.startswith(load.run + "-")]
    counts = collections.Counter(mine)

    lost = sorted(r for r in load.acked if counts[r] == 0)
    duplicated = sorted(r for r, n in counts.items() if n > 1)
    unacked_stored = sum(1 for r in load.unacked if counts[r] == 1)
    for r in replicas:
        if guestbook_remarks(f, r) != stored:
            problems.append(f"replica {r}'s guestbook differs from the primary's")
    maybe = sum(1 for req in load.failures() if req[4] == "503 maybe")
    log(f"posts: {len(load.acked)} acknowledged, {load.replays} acknowledged ones sent again "
        f"(answered 303), {len(load.unacked)} never acknowledged ({unacked_stored} of them "
        f"stored, which is allowed); the guestbook ({primary} and {', '.join(replicas)}) holds "
        f"{len(mine)} entries of this run: {len(lost)} lost, {len(duplicated)} duplicated; "
        f"{maybe} answers through HAProxy said \"{MAYBE}\"")
    if lost:
        problems.append(f"{len(lost)} acknowledged posts are not in the guestbook: "
                        + ", ".join(lost[:50]))
    if duplicated:
        problems.append(f"{len(duplicated)} posts are in the guestbook more than once: "
                        + ", ".join(f"{r} x{counts[r]}" for r in duplicated[:50]))
    if len(load.acked) < 50:
        problems.append(f"only {len(load.acked)} posts were acknowledged: the load did not run")

    # Failures per phase (by when each failed request ended).
    log("")
    log(f"{'phase':18} {'from s':>7} {'to s':>7} {'requests':>9} {'failed':>7}  failures by kind")
    for name, lo, hi in scenario.phases[:-1]:
        reqs = load.in_phase(lo, hi)
        failed = [r for r in reqs if not r[3]]
        kinds = collections.Counter(f"{r[2]}: {r[4]}" for r in failed)
        log(f"{name:18} {lo:7.2f} {hi:7.2f} {len(reqs):9} {len(failed):7}  "
            + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())))
        if not reqs:
            problems.append(f"no request ended during phase {name!r}")

    # Every failure inside the window after a fault, up to the next fault at the latest: a
    # failure belongs to the latest fault before it. A fault allowed no failures has a window
    # that lasts until the fleet was whole again, in which none may fall.
    windows = []
    for i, e in enumerate(scenario.faults):
        hi = e["at"] + WINDOW[e["kind"]]
        if i + 1 < len(scenario.faults):
            hi = min(hi, scenario.faults[i + 1]["at"])
        windows.append((e["at"], hi))
    outside = [r for r in load.failures() if not any(lo <= r[1] < hi for lo, hi in windows)]
    if outside:
        problems.append(f"{len(outside)} requests failed outside the windows allowed after "
                        f"the faults: {outside[:10]}")

    log("")
    log("faults (seconds after each):")
    for i, e in enumerate(scenario.faults):
        window = WINDOW[e["kind"]]
        end = scenario.faults[i + 1]["at"] if i + 1 < len(scenario.faults) else None
        failed = load.failures(e["at"], end)
        last = max((r[1] - e["at"] for r in failed), default=None)
        whole = e["whole"] - e["at"]
        if last is not None:
            whole = max(whole, last)
        events = "; ".join(f"{label} +{t:.2f}" for label, t in e["events"])
        bound = f"allowed for {window:.0f} s" if window else "none allowed"
        last_text = f", the last +{last:.2f}" if last is not None else ""
        log(f"  {e['what']}: {len(failed)} failed ({bound}{last_text}); "
            f"service whole after {whole:.2f} s")
        log(f"      {events}")
    log("")
    for note in scenario.notes:
        log(note)
    return problems


def failovers(f):
    """How many times sentinel1 saw the primary move (+switch-master in its log)."""
    with open(f.proc(f.layout.sentinels[0].name).log, errors="replace") as log_file:
        return sum(1 for line in log_file if "+switch-master" in line)


# --------------------------------------------------------------------------------------------

def main():
    spoold = os.environ.get("SPOOLD", "")
    netdelay = os.environ.get("SPOOL_NETDELAY", "")
    if not os.access(spoold, os.X_OK):
        log(f"env SPOOLD must name the spoold binary (got {spoold!r})")
        return 1
    if not os.access(netdelay, os.X_OK):
        log(f"env SPOOL_NETDELAY must name the netdelay binary (got {netdelay!r})")
        return 1
    if os.geteuid() != 0:
        log("this test makes network namespaces: it must run as root")
        return 1
    for program in ("haproxy", "redis-server", "redis-sentinel", "ip", "nft", "iptables-legacy"):
        if not shutil.which(program) and not os.access(f"/usr/sbin/{program}", os.X_OK):
            log(f"{program} is missing: run scripts/install-deps.sh")
            return 1
    tmp = tempfile.mkdtemp(prefix="spoold-fleet-")
    started = time.monotonic()
    ok = False
    with netns.Lab("faults", netdelay=netdelay) as lab:
        layout = fleet.Layout.in_lab(lambda name: (lambda h: (h.ns, h.addr))(lab.add_host(name)),
                                     nodes=NODES, replicas=REPLICAS)
        lab.check_isolated()
        # This thread, and every thread and process it starts, talks from the client's host.
        lab.enter(lab.host("client"))
        f = fleet.Fleet(tmp, layout, spoold, site=os.environ.get("SPOOLD_SITE") or None)
        log(f"fleet: {NODES} nodes behind HAProxy {f.url}, Redis with {REPLICAS} replicas and "
            f"Sentinel, each in a namespace of its own ({lab.base}-*), state in {tmp}")
        try:
            f.start(60)
            log(f"fleet up after {time.monotonic() - started:.1f} s")
            load = Load(layout.haproxy.addr, layout.haproxy.port, f"run{uuid.uuid4().hex[:8]}",
                        time.monotonic())
            load.start()
            scenario = Scenario(f, lab, load)
            try:
                scenario.run()
            finally:
                load.stop()
            problems = check(f, load, scenario)
            log(f"failovers seen by sentinel1: {failovers(f)} (2 caused: the partition, the kill)")
            log("")
            if problems:
                log("FAILED:")
                for p in problems:
                    log(f"  - {p}")
            else:
                log("all checks passed")
            ok = not problems
        except Exception:
            traceback.print_exc()
            for e in (layout.haproxy, *layout.nodes, *layout.redis, layout.sentinels[0]):
                log(f"--- {e.name}'s log ends:\n{fleet.tail(f.proc(e.name).log, 15)}")
        finally:
            stopped = f.stop()
            log(f"stopped {', '.join(stopped)}; {time.monotonic() - started:.1f} s in all")
    left = [ns for ns in netns.namespaces() if ns.startswith(lab.base + "-")]
    if left:
        log(f"namespaces left behind: {', '.join(left)}")
        ok = False
    if os.environ.get("SPOOLD_KEEP_TMP") or not ok:
        log(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
