"""The fleet under load, with parts killed one after another: no acknowledged post is lost or
stored twice, failures stay inside a bounded window after each fault, and a rolling restart of
every node fails no request.

The fleet is cluster/fleet.py's (HAProxy, 3 spoold nodes on redis-sentinel:// with
--store-replicas 1, a Redis primary and replica with appendfsync always, 3 Sentinels) on a
127.x.y.0/24 block and ports of its own, in a temporary directory; everything it started is
stopped at the end, whatever happened. A load client (threads, http.client) sends through
HAProxy a mix of GET /, GET /guestbook and POST /guestbook, each post with a unique remark and
post key, and records every request and every acknowledged (303) post. A post that fails is
sent again later with the same key, as a user would; a few acknowledged ones are sent again
on purpose. During the run, one after another:

  1. kill -9 a node; once HAProxy has marked it down, start it again;
  2. SIGSTOP a node for 5 s, then SIGCONT (a hung machine);
  3. kill -9 the Redis primary: Sentinel promotes the replica, spoold follows;
  4. start the old primary again: Sentinel makes it a replica of the new one;
  5. a rolling SIGTERM restart of every node (each drains, exits, starts, comes back up).

Then it checks, and prints: every acknowledged post is in the final guestbook exactly once (on
the primary and on the replica); failures per phase; no failure at all during the rolling
restart, and none outside the window of WINDOW[fault] seconds after each fault (a failed
request counts at the time its answer, or its error, came); and, for each fault, when service
was whole again. Release builds only (tests/server/CMakeLists.txt): it measures nothing, but
under a sanitizer the nodes are too slow for the balancer's 2 s health-check timeout.

Environment: SPOOLD (the binary), SPOOLD_SITE (the demo site); SPOOLD_KEEP_TMP=1 keeps the
fleet's directory (configs, data, logs) and prints where.
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
import urllib.parse
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "cluster"))
import fleet  # noqa: E402

NODES = 3
WORKERS = 4
PACE_S = 0.02              # each worker's pause between requests: about 150 requests/s in all
REQUEST_TIMEOUT_S = 30
STEADY_S = 2.0             # load with no fault before, between and after the faults
RUN_LIMIT_S = 300          # the load stops by itself after this, whatever happens
# How long after each fault a failure is allowed. A node kill costs the requests it was
# serving (HAProxy's health check takes it out within a second). The SIGSTOP holds requests
# for 5 s; they complete when the node resumes (timeout server is 10 s). The primary's kill
# costs reads until Sentinel promotes the replica (down-after 2 s, then the election), and
# posts until the old primary is back as a replica: with --store-replicas 1 a post is not
# acknowledged while the primary has no replica (WAIT), and Sentinel turns a returning old
# primary into a replica about 10 s after it is back.
WINDOW = {"kill -9 node": 20.0, "SIGSTOP node": 20.0, "kill -9 primary": 75.0}
PHASES = ("steady", "kill -9 node", "SIGSTOP node", "kill -9 primary", "restart old primary",
          "rolling restart", "tail")


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


class Load:
    """WORKERS threads sending requests through HAProxy until stop() or RUN_LIMIT_S."""

    def __init__(self, addr, port, run):
        self.addr, self.port, self.run = addr, port, run
        self.t0 = time.monotonic()
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

    def _request(self, method, path, body=None):
        """(status, detail): the status code, or None and the exception's name."""
        try:
            status, _, _ = fleet.request(self.addr, self.port, method, path, body,
                                         REQUEST_TIMEOUT_S)
            return status, str(status)
        except (OSError, http.client.HTTPException) as e:
            return None, type(e).__name__

    def _post(self, post):
        body = urllib.parse.urlencode({"guest-name": "fleet", "guest-remarks": post.remark,
                                       "post-key": post.key})
        post.attempts += 1
        return self._request("POST", "/guestbook", body)

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
                status, detail = self._request("GET", "/")
                self._record(start, "GET /", status, detail, 200)
            elif roll < 0.75:
                status, detail = self._request("GET", "/guestbook")
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

    def failures(self, lo=None, hi=None):
        """Failed requests whose end lies in [lo, hi)."""
        with self.lock:
            return [r for r in self.requests if not r[3]
                    and (lo is None or r[1] >= lo) and (hi is None or r[1] < hi)]

    def acked_post_started_after(self, t):
        with self.lock:
            return any(r[2] == "POST" and r[3] and r[0] >= t for r in self.requests)


# --------------------------------------------------------------------------------------------
# The scenario
# --------------------------------------------------------------------------------------------

class Scenario:
    def __init__(self, f, load):
        self.f, self.load = f, load
        self.phases = []   # (name, start, end)
        self.faults = []   # dicts: name, what, at, whole, events [(label, t)]

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

    def run(self):
        f, load = self.f, self.load
        self.phase("steady")
        self.steady()

        self.phase("kill -9 node")
        victim = f.layout.nodes[0].name
        e = self.fault("kill -9 node", f"kill -9 {victim}")
        f.kill_node(victim)
        f.wait_node_state(victim, ("DOWN",), 30)
        self.event(e, "HAProxy marked it DOWN")
        f.start_node(victim, 30)
        self.event(e, "restarted and UP again")
        e["whole"] = load.now()
        self.steady()

        self.phase("SIGSTOP node")
        victim = f.layout.nodes[1].name
        e = self.fault("SIGSTOP node", f"SIGSTOP {victim} for 5 s")
        f.pause_node(victim)
        time.sleep(5.0)  # the scenario: a machine that hangs for 5 s
        f.resume_node(victim)
        self.event(e, "SIGCONT")
        f.wait_node_state(victim, ("UP",), 30)
        self.event(e, "UP")
        e["whole"] = load.now()
        self.steady()

        self.phase("kill -9 primary")
        f.wait_sentinels_agree(30)  # a replica ready to be promoted
        old = f.primary()
        assert old is not None, "the Sentinels report no primary before the kill"
        e = self.fault("kill -9 primary", f"kill -9 the Redis primary ({old})")
        f.kill_redis(old)
        new = f.wait_for_new_primary(old, 60)
        self.event(e, f"Sentinel promoted {new}")
        self.phase("restart old primary")
        f.start_redis(old, 30)
        self.event(e, f"{old} restarted")
        f.wait_replica_online(old, 90)
        self.event(e, f"{old} is an online replica of {new}")
        rejoined = load.now()
        fleet.wait_for(lambda: load.acked_post_started_after(rejoined), 30,
                       "a post acknowledged after the old primary rejoined")
        self.event(e, "posts acknowledged again")
        e["whole"] = load.now()
        self.steady()

        self.phase("rolling restart")
        e = self.fault("rolling restart", "rolling SIGTERM restart of every node")
        f.rolling_restart(60, on_event=lambda name, what: self.event(e, f"{name}: {what}"))
        e["whole"] = load.now()
        self.phase("tail")
        self.steady()
        self.phase("end")


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

def guestbook_remarks(f, name):
    """The remarks of every entry in Redis instance `name`, oldest first."""
    r = f._redis(name)
    items = fleet.redis_command(r.addr, r.port, "LRANGE", "guestbook_remarks", 0, -1, timeout=10)
    return [item.decode().split("\n", 1)[-1] for item in items]


def check(f, load, scenario):
    problems = []
    primary = f.primary()
    replica = next(r.name for r in f.layout.redis if r.name != primary)
    # The replica has caught up once both lists are equally long (both only grow).
    fleet.wait_for(lambda: len(guestbook_remarks(f, replica)) == len(guestbook_remarks(f, primary)),
                   30, "the replica to hold as many entries as the primary")
    stored = guestbook_remarks(f, primary)
    on_replica = guestbook_remarks(f, replica)
    mine = [r for r in stored if r.startswith(load.run + "-")]
    counts = collections.Counter(mine)

    lost = sorted(r for r in load.acked if counts[r] == 0)
    duplicated = sorted(r for r, n in counts.items() if n > 1)
    unacked_stored = sum(1 for r in load.unacked if counts[r] == 1)
    if on_replica != stored:
        problems.append(f"the replica's guestbook differs from the primary's "
                        f"({len(on_replica)} against {len(stored)} entries)")
    log(f"posts: {len(load.acked)} acknowledged, {load.replays} acknowledged ones sent again "
        f"(answered 303), {len(load.unacked)} never acknowledged ({unacked_stored} of them "
        f"stored, which is allowed); the guestbook holds {len(mine)} entries of this run: "
        f"{len(lost)} lost, {len(duplicated)} duplicated")
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
    log(f"{'phase':22} {'from s':>7} {'to s':>7} {'requests':>9} {'failed':>7}  failures by kind")
    by_phase = {}
    for name, lo, hi in scenario.phases[:-1]:
        with load.lock:
            reqs = [r for r in load.requests if lo <= r[1] < hi]
        failed = [r for r in reqs if not r[3]]
        by_phase[name] = failed
        kinds = collections.Counter(f"{r[2]}: {r[4]}" for r in failed)
        log(f"{name:22} {lo:7.2f} {hi:7.2f} {len(reqs):9} {len(failed):7}  "
            + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items())))
        if not reqs:
            problems.append(f"no request ended during phase {name!r}")
    if by_phase.get("rolling restart"):
        problems.append(f"{len(by_phase['rolling restart'])} requests failed during the rolling "
                        f"restart (must be 0): {by_phase['rolling restart'][:10]}")

    # Every failure inside the window after a fault, up to the next fault at the latest: a
    # failure belongs to the latest fault before it.
    windows = []
    for i, e in enumerate(scenario.faults):
        hi = e["at"] + WINDOW.get(e["kind"], 0.0)
        if i + 1 < len(scenario.faults):
            hi = min(hi, scenario.faults[i + 1]["at"])
        windows.append((e["at"], hi))
    outside = [r for r in load.failures() if not any(lo <= r[1] < hi for lo, hi in windows)]
    if outside:
        problems.append(f"{len(outside)} requests failed outside every fault's window: "
                        f"{outside[:10]}")

    log("")
    log("faults (seconds after each):")
    for e, (lo, hi) in zip(scenario.faults, windows):
        window = WINDOW.get(e["kind"])
        failed = load.failures(lo, hi) if window else by_phase.get("rolling restart", [])
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
        if window and whole > window:
            problems.append(f"{e['what']}: service whole only after {whole:.1f} s "
                            f"(bound {window:.0f} s)")
    return problems


# --------------------------------------------------------------------------------------------

def main():
    spoold = os.environ.get("SPOOLD", "")
    if not os.access(spoold, os.X_OK):
        log(f"env SPOOLD must name the spoold binary (got {spoold!r})")
        return 1
    for program in ("haproxy", "redis-server", "redis-sentinel"):
        if not shutil.which(program) and not os.access(f"/usr/bin/{program}", os.X_OK):
            log(f"{program} is missing: run scripts/install-deps.sh")
            return 1
    tmp = tempfile.mkdtemp(prefix="spoold-fleet-")
    layout = fleet.Layout.free(nodes=NODES)
    settings = fleet.Settings(down_after_ms=2000, drain_delay_s=3.0, store_replicas=1,
                              replica_timeout_s=1.0)
    f = fleet.Fleet(tmp, layout, spoold, site=os.environ.get("SPOOLD_SITE") or None,
                    settings=settings)
    started = time.monotonic()
    log(f"fleet: {NODES} nodes behind HAProxy {f.url}, Redis with Sentinel on "
        f"{layout.haproxy.addr.rsplit('.', 1)[0]}.0/24, state in {tmp}")
    load = None
    ok = False
    try:
        f.start(60)
        log(f"fleet up after {time.monotonic() - started:.1f} s")
        load = Load(layout.haproxy.addr, layout.haproxy.port, f"run{uuid.uuid4().hex[:8]}")
        load.start()
        scenario = Scenario(f, load)
        try:
            scenario.run()
        finally:
            load.stop()
        problems = check(f, load, scenario)
        log("")
        if problems:
            log("FAILED:")
            for p in problems:
                log(f"  - {p}")
        else:
            log("all checks passed")
        ok = not problems
    except Exception:
        import traceback
        traceback.print_exc()
        for name in ("haproxy", *[n.name for n in layout.nodes], "redis1", "redis2",
                     "sentinel1"):
            log(f"--- {name}'s log ends:\n{fleet.tail(f.proc(name).log, 15)}")
    finally:
        stopped = f.stop()
        log(f"stopped {', '.join(stopped)}; {time.monotonic() - started:.1f} s in all")
        if os.environ.get("SPOOLD_KEEP_TMP") or not ok:
            log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
