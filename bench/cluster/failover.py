#!/usr/bin/env python3
"""Failover time of a spoold fleet: from kill -9 of the Redis primary to the first post
acknowledged (303) through HAProxy, for posts sent after the kill. Run by `spool-bench cluster`
(which reads the last line of stdout); runnable alone.

    failover.py --spoold PATH [--repeat N] [--replicas K] [--site DIR]

A fleet of cluster/fleet.py (one spoold node, Redis primary and replica, three Sentinels with
down-after-milliseconds 2000, HAProxy) on a 127.x.y.0/24 block and ports of its own, in a
temporary directory, stopped at the end whatever happens. One client thread posts through
HAProxy, each post with a key of its own, one every POST_PACE_S. For each repeat: wait until the
fleet is whole (the replica online, the Sentinels agreed), kill -9 the primary, and wait for
the first acknowledged post sent after the kill. Then start the old primary again and wait until
it is an online replica and posts are acknowledged, before the next repeat.

--replicas K is spoold's --store-replicas. With 1 (make cluster's setting) a post needs a
replica's confirmation, and with two Redis instances the promoted one has none until the old
primary is back as its replica: the time then includes the old primary's restart (started as
soon as the Sentinels promoted the other) and its conversion into a replica. With 0 it is
Sentinel's detection and promotion and spoold following it.

Prints one progress line per repeat to stderr and, last on stdout, one line:
    failover replicas=K seconds=S1,S2,...
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
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import fleet  # noqa: E402

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
                status, _, _ = fleet.request(self.addr, self.port, "POST", "/guestbook", body,
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
    parser.add_argument("--replicas", type=int, default=1, choices=(0, 1))
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat wants at least 1")

    tmp = tempfile.mkdtemp(prefix="spool-bench-failover-")
    layout = fleet.Layout.free(nodes=1)
    settings = fleet.Settings(down_after_ms=2000, store_replicas=args.replicas)
    f = fleet.Fleet(tmp, layout, args.spoold, site=args.site, settings=settings)
    poster = None
    seconds = []
    try:
        f.start(60)
        poster = Poster(layout.haproxy.addr, layout.haproxy.port)
        poster.thread.start()
        for i in range(args.repeat):
            f.wait_sentinels_agree(60)
            old = f.primary()
            if old is None:
                raise fleet.FleetError("the Sentinels report no primary")
            killed = time.monotonic()
            f.kill_redis(old)
            new = f.wait_for_new_primary(old, FAILOVER_LIMIT_S)
            # The old primary is started again as soon as another is promoted: with replicas=1
            # no post can be acknowledged before it is back as a replica.
            f.start_redis(old, 30)
            answered = fleet.wait_for(lambda: poster.first_ack_sent_after(killed),
                                      FAILOVER_LIMIT_S, "a post acknowledged after the kill")
            seconds.append(answered - killed)
            print(f"failover {i + 1}/{args.repeat}: {old} killed, {new} promoted, first post "
                  f"acknowledged after {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
            f.wait_replica_online(old, 90)
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
    print(f"failover replicas={args.replicas} seconds="
          + ",".join(f"{s:.3f}" for s in seconds), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
