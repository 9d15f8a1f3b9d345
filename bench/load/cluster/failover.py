#!/usr/bin/env python3
"""Failover time of a spoold fleet: from kill -9 of the Redis primary to the first post
acknowledged (303) through HAProxy, for posts sent after the kill. Run by `spool-load-bench
cluster` (which reads the last line of stdout); runnable alone.

    failover.py --spoold PATH [--repeat N] [--redis-replicas R] [--store-replicas K]
                [--down-after-ms MS] [--site DIR]

A fleet of cluster/fleet.py (one spoold node, a Redis primary and R replicas, three Sentinels,
HAProxy; make cluster's timings, fleet.Settings) on a 127.x.y.0/24 block and ports of its own,
in a temporary directory, stopped at the end whatever happens. One client thread posts through
HAProxy, each post with a key of its own, one every POST_PACE_S. For each repeat: wait until the
fleet is whole (every replica online, the Sentinels agreed), kill -9 the primary, and wait for
the first acknowledged post sent after the kill. Then start the old primary again and wait until
it is an online replica and posts are acknowledged, before the next repeat.

--store-replicas K is spoold's (make cluster's is 1: a post needs a replica's confirmation).
With R = 2 (make cluster's) the promoted replica has the other one to confirm posts, and the
old primary stays down until the time is taken. With R = 1 the promoted one has no replica
until the old primary is back: the old primary is started again as soon as the Sentinels
promoted the other, and the time includes its conversion into a replica.

Prints one progress line per repeat to stderr (with when the Sentinels named the new primary)
and, last on stdout, one line:
    failover redis-replicas=R store-replicas=K seconds=S1,S2,...
Exit status 0, or 1 with the reason on stderr.
"""

import argparse
import http.client
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "cluster"))
import fleet  # noqa: E402
import wire  # noqa: E402

POST_PACE_S = 0.01      # the poster's pause between posts (a rate, not synchronisation)
REQUEST_TIMEOUT_S = 15
FAILOVER_LIMIT_S = 120  # a failover that takes longer ends the run with an error


class Poster:
    """One thread posting through HAProxy; remembers when each acknowledged post was sent."""

    def __init__(self, addr, port):
        self.addr, self.port = addr, port
        self.lock = threading.Lock()
        self.acked = []  # (sent, answered) in time.monotonic()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.stopping.is_set():
            key = uuid.uuid4().hex
            body = urllib.parse.urlencode({"guest-name": "failover", "guest-remarks": key,
                                           "post-key": key})
            sent = time.monotonic()
            try:
                status, _, _ = wire.request(self.addr, self.port, "POST", "/guestbook", body,
                                             REQUEST_TIMEOUT_S)
            except (OSError, http.client.HTTPException):
                status = None
            if status == 303:
                with self.lock:
                    self.acked.append((sent, time.monotonic()))
            self.stopping.wait(POST_PACE_S)

    def first_ack_sent_after(self, t):
        """The answer time of the first acknowledged post sent at or after t, or None."""
        with self.lock:
            times = [answered for sent, answered in self.acked if sent >= t]
        return min(times) if times else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spoold", required=True)
    parser.add_argument("--site", default=None)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--redis-replicas", type=int, default=2, choices=(1, 2))
    parser.add_argument("--store-replicas", type=int, default=1, choices=(0, 1))
    parser.add_argument("--down-after-ms", type=int, default=fleet.Settings.down_after_ms,
                        help="Sentinel's down-after-milliseconds (default: make cluster's)")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat wants at least 1")

    tmp = tempfile.mkdtemp(prefix="spool-load-bench-failover-")
    layout = fleet.Layout.free(nodes=1, replicas=args.redis_replicas)
    settings = fleet.Settings(store_replicas=args.store_replicas,
                              down_after_ms=args.down_after_ms)
    f = fleet.Fleet(tmp, layout, args.spoold, site=args.site, settings=settings)
    poster = None
    seconds = []
    try:
        f.start(60)
        poster = Poster(layout.haproxy.addr, layout.haproxy.port)
        poster.thread.start()
        for i in range(args.repeat):
            f.store.wait_sentinels_agree(60)
            old = f.store.primary()
            if old is None:
                raise fleet.FleetError("the Sentinels report no primary")
            killed = time.monotonic()
            f.store.kill_redis(old)
            new = f.store.wait_for_new_primary(old, FAILOVER_LIMIT_S)
            named = time.monotonic()
            if args.redis_replicas == 1:
                # No post can be acknowledged before the old primary is back as a replica.
                f.store.start_redis(old, 30)
            answered = fleet.wait_for(lambda: poster.first_ack_sent_after(killed),
                                      FAILOVER_LIMIT_S, "a post acknowledged after the kill")
            seconds.append(answered - killed)
            print(f"failover {i + 1}/{args.repeat}: {old} killed, {new} named primary by the "
                  f"Sentinels after {named - killed:.2f} s, first post acknowledged after "
                  f"{seconds[-1]:.2f} s", file=sys.stderr, flush=True)
            if args.redis_replicas > 1:
                f.store.start_redis(old, 30)
            f.store.wait_replica_online(old, 90)
            whole = time.monotonic()
            fleet.wait_for(lambda: poster.first_ack_sent_after(whole), 60,
                           "a post acknowledged once the old primary is a replica again")
    except fleet.FleetError as e:
        print(f"failover.py: {e}", file=sys.stderr)
        return 1
    finally:
        if poster is not None:
            poster.stopping.set()
            poster.thread.join(REQUEST_TIMEOUT_S + 5)
        f.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"failover redis-replicas={args.redis_replicas} store-replicas={args.store_replicas} "
          "seconds="
          + ",".join(f"{s:.3f}" for s in seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
