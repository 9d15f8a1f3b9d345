"""spoold on redis-sentinel://: a Redis primary and replica with three Sentinels (started by
cluster/fleet.py on a 127.x.y.0/24 block and ports of their own), and spoold with
--store-replicas 1.

Checks: posts are acknowledged once on the replica too and /healthz names the primary; a post
the replica cannot confirm in time is answered 503 saying it may or may not be stored, and is
stored once when sent again; while the primary does not answer, the guestbook's page is read
from the replica (saying so, the visit not counted) and posts are refused, but a page view that
finds every store connection busy is refused, not read from the replica; spoold follows a
failover (SENTINEL FAILOVER), hearing of it through +switch-master, and writes to the new
primary; with no primary known (no Sentinel answers, or none knows the master) the guestbook
answers 503 saying so, static files are served, and /healthz says why the store is down. Runs
under the sanitizers too: the Sentinel watchers are threads of spoold's."""

import concurrent.futures
import os
import signal
import sys
import unittest

from spoold_harness import (HELLO, SCALE, Spoold, TempDir, free_port, make_site, main,
                            page_entries, raise_nofile_limit, require_redis, wait_until)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "cluster"))
import fleet  # noqa: E402
import wire  # noqa: E402


def remarks_in(f, name):
    r = f.store.redis(name)
    items = wire.redis_command(r.addr, r.port, "LRANGE", "guestbook_remarks", 0, -1)
    return [item.decode().split("\n", 1)[-1] for item in items]


class SentinelStoreTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        raise_nofile_limit()
        require_redis()
        cls.tmp = TempDir("spoold-sentinel-")
        cls.site = make_site(cls.tmp.path)
        cls.fleet = fleet.Fleet(os.path.join(cls.tmp.path, "fleet"),
                                fleet.Layout.free(nodes=1, replicas=1),
                                os.environ.get("SPOOLD", ""),
                                settings=fleet.Settings(down_after_ms=1000))
        cls.server = None
        try:
            cls.fleet.prepare()
            cls.fleet.store.start(60 * SCALE)
            cls.server = Spoold(cls.site, cls.fleet.store.spec(),
                                ["--store-replicas", "1", "--store-replicas-timeout", "0.5",
                                 "--threads", "2:16"]).start()
        except BaseException:
            cls.fleet.stop()
            cls.tmp.close()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.server is not None:
                if not cls.server.alive():
                    raise AssertionError(f"spoold died:\n{cls.server.err.text()[-8000:]}")
                cls.server.stop()
        finally:
            cls.fleet.stop()
            cls.tmp.close()

    def post(self, remark, key=None, server=None):
        fields = {"guest-name": "s", "guest-remarks": remark}
        if key is not None:
            fields["post-key"] = key
        return (server or self.server).post_form("/guestbook", fields)

    def primary_and_replica(self):
        primary = self.fleet.store.primary()
        replica = next(r.name for r in self.fleet.layout.redis if r.name != primary)
        return primary, replica

    # Named in the order they run (unittest sorts them): the failover comes after the rest.

    def test_1_posts_reach_the_replica_before_the_answer(self):
        primary, replica = self.primary_and_replica()
        resp = self.post("replicated", "key-1")
        self.assertEqual(resp.status, 303, resp)
        # WAIT 1 returned before the 303: the replica has the entry now, no polling.
        self.assertIn("replicated", remarks_in(self.fleet, replica))
        health = self.server.get("/healthz")
        self.assertEqual(health.status, 200)
        where = self.fleet.store.redis(primary).text
        self.assertIn(f"store: up (primary {where})".encode(), health.body)
        self.assertIn(self.fleet.store.spec(), self.server.out.text())

    def test_2_unconfirmed_post_is_503_and_its_replay_is_stored_once(self):
        primary, replica = self.primary_and_replica()
        self.fleet.proc(replica).send(signal.SIGSTOP)  # the replica hangs: WAIT times out
        try:
            resp = self.post("unconfirmed", "key-2")
            self.assertEqual(resp.status, 503, resp)
            self.assertIn(b"may or may not have been stored", resp.body)
            self.assertIn(b"Sending the form again is safe", resp.body)
            self.assertIn(b"0 of 1 replicas", resp.body)
            resp = self.post("keyless while unconfirmed")
            self.assertEqual(resp.status, 503, resp)
            self.assertIn(b"look at the guestbook before you post it again", resp.body)
            # It is on the primary, and reads work meanwhile.
            self.assertIn("unconfirmed", remarks_in(self.fleet, primary))
            self.assertEqual(self.server.get("/guestbook").status, 200)
        finally:
            self.fleet.proc(replica).send(signal.SIGCONT)
        self.fleet.store.wait_replica_online(replica, 60 * SCALE)
        wait_until(lambda: self.post("unconfirmed", "key-2").status == 303, 30,
                   "the replayed post to be acknowledged once the replica is back")
        self.assertEqual(remarks_in(self.fleet, primary).count("unconfirmed"), 1)
        self.assertEqual(remarks_in(self.fleet, replica).count("unconfirmed"), 1)

    def set_down_after(self, ms):
        for s in self.fleet.layout.sentinels:
            self.assertEqual(wire.redis_command(s.addr, s.port, "SENTINEL", "SET", "fleet",
                                                 "down-after-milliseconds", ms), "OK")

    def test_2b_pages_are_read_from_the_replica_while_the_primary_is_away(self):
        primary, replica = self.primary_and_replica()
        self.fleet.store.wait_replica_online(replica, 60 * SCALE)
        self.assertEqual(self.post("read from the replica", "key-2b").status, 303)
        r = self.fleet.store.redis(replica)
        # The primary hangs, and the Sentinels are told to wait for it rather than fail over.
        self.set_down_after(600_000)
        self.fleet.proc(primary).send(signal.SIGSTOP)
        try:
            counted = int(wire.redis_command(r.addr, r.port, "GET", "visitor_count"))
            resp = self.server.get("/guestbook")
            self.assertEqual(resp.status, 200, resp)
            self.assertIn(b"was read from a replica", resp.body)
            self.assertIn(b"this visit was not counted", resp.body)
            self.assertIn(("s", "read from the replica"), page_entries(resp.body.decode()))
            self.assertIn(f'<strong id="visitor-count">{counted}</strong>'.encode(), resp.body)
            self.assertEqual(int(wire.redis_command(r.addr, r.port, "GET", "visitor_count")),
                             counted)
            # A post never goes to a replica.
            resp = self.post("while the primary is away", "key-2c")
            self.assertEqual(resp.status, 503, resp)
        finally:
            self.fleet.proc(primary).send(signal.SIGCONT)
            self.set_down_after(1000)
        wait_until(lambda: b"read from a replica" not in self.server.get("/guestbook").body, 30,
                   "pages to be read from the primary again")
        self.assertNotIn("while the primary is away", remarks_in(self.fleet, replica))

    def test_2c_a_busy_store_is_503_not_a_page_from_the_replica(self):
        # A page view that finds every store connection lent is refused (the primary answers:
        # it is the load), not read from the replica as while the primary is away.
        primary, replica = self.primary_and_replica()
        self.fleet.store.wait_replica_online(replica, 60 * SCALE)
        p = self.fleet.store.redis(primary)
        # Two replicas asked for and one there: a post holds the only connection in WAIT (for
        # up to 60 s) while the replica answers reads, until the test unblocks it.
        busy = Spoold(self.site, self.fleet.store.spec(),
                      ["--store-connections", "1", "--store-replicas", "2",
                       "--store-replicas-timeout", "60", "--threads", "2:16"]).start()
        try:
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                post = pool.submit(self.post, "held in WAIT", "key-busy", busy)
                waiting = []

                def post_waits():
                    clients = wire.redis_command(p.addr, p.port, "CLIENT", "LIST").decode()
                    waiting[:] = [line.split()[0].split("=")[1] for line in clients.splitlines()
                                  if " cmd=wait " in f" {line} "]
                    return waiting

                wait_until(post_waits, 30, "the post to reach WAIT")
                try:
                    resp = busy.get("/guestbook")
                    # The health check has a connection of its own: the node is loaded, and
                    # its store is up.
                    health = busy.get("/healthz")
                finally:
                    for client in waiting:
                        wire.redis_command(p.addr, p.port, "CLIENT", "UNBLOCK", client)
                self.assertEqual(health.status, 200, health)
                self.assertIn(f"store: up (primary {p.text})".encode(), health.body)
                self.assertEqual(resp.status, 503, resp)
                self.assertIn(b"too busy", resp.body)
                self.assertIn(b"all 1 connections busy", resp.body)
                self.assertNotIn(b"read from a replica", resp.body)
                # Unblocked, WAIT counted one replica of the two.
                resp = post.result()
                self.assertEqual(resp.status, 503, resp)
                self.assertIn(b"1 of 2 replicas", resp.body)
            line = busy.err.wait_for(lambda l: "connections busy" in l, 30)
            self.assertIsNotNone(line, busy.err.text())
            self.assertTrue(line.startswith("spoold: store: "), line)
        finally:
            busy.stop()
        self.assertEqual(remarks_in(self.fleet, primary).count("held in WAIT"), 1)

    def test_3_failover_is_followed(self):
        old, replica = self.primary_and_replica()
        self.assertEqual(self.post("before the failover", "key-3a").status, 303)
        # The replica was stopped a moment ago: SENTINEL FAILOVER needs it seen as healthy.
        self.fleet.store.wait_sentinels_agree(60 * SCALE)
        s = self.fleet.layout.sentinels[0]
        self.assertEqual(wire.redis_command(s.addr, s.port, "SENTINEL", "FAILOVER", "fleet"), "OK")
        new = self.fleet.store.wait_for_new_primary(old, 60 * SCALE)
        self.assertEqual(new, replica)
        # spoold heard the switch from the Sentinels (its watcher prints one line per move).
        new_addr = self.fleet.store.redis(new).text
        wait_until(lambda: f"the primary is now {new_addr} (+switch-master)" in
                   self.server.err.text(), 30, "spoold to report +switch-master")
        # The old primary is now a replica of the new one; once it is in sync, posts are
        # acknowledged again, on the new primary.
        self.fleet.store.wait_replica_online(old, 90 * SCALE)
        wait_until(lambda: self.post("after the failover", "key-3b").status == 303, 30,
                   "a post to be acknowledged after the failover")
        on_new = remarks_in(self.fleet, new)
        self.assertEqual(on_new.count("after the failover"), 1)
        self.assertEqual(on_new.count("before the failover"), 1)
        self.assertIn("after the failover", remarks_in(self.fleet, old))
        health = self.server.get("/healthz").body
        self.assertIn(f"store: up (primary {new_addr})".encode(), health)
        # The same form sent again after the failover is still recognised.
        self.assertEqual(self.post("before the failover", "key-3a").status, 303)
        self.assertEqual(remarks_in(self.fleet, new).count("before the failover"), 1)

    def check_no_primary(self, spec):
        server = Spoold(self.site, spec).start()
        try:
            resp = server.get("/guestbook")
            self.assertEqual(resp.status, 503, resp)
            self.assertIn(b"no primary right now", resp.body)
            self.assertIn(b"no Redis primary known", resp.body)
            resp = self.post("nowhere", "key-4", server=server)
            self.assertEqual(resp.status, 503, resp)
            self.assertIn(b"no primary right now", resp.body)
            resp = server.get("/hello.txt")
            self.assertEqual((resp.status, resp.body), (200, HELLO))
            health = server.get("/healthz")
            self.assertEqual(health.status, 200)
            self.assertIn(b"store: down (", health.body)
            self.assertIn(b"no Redis primary known", health.body)
        finally:
            server.stop()

    def test_4_unknown_master_means_no_primary(self):
        sentinels = ",".join(s.text for s in self.fleet.layout.sentinels)
        self.check_no_primary(f"redis-sentinel://{sentinels}/no-such-master")

    def test_5_no_sentinel_answering_means_no_primary(self):
        self.check_no_primary(f"redis-sentinel://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
                              "/fleet")


if __name__ == "__main__":
    main()
