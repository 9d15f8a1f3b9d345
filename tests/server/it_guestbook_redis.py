"""The guestbook on a real redis-server: round trip, ZeroHTTPd's raw keys, and the store going
down (503 for the guestbook, static files unaffected, /healthz says so) and coming back."""

import concurrent.futures
import os

from spoold_harness import (HELLO, GuestbookChecks, Redis, ServerTestCase, main, page_entries,
                            require_redis, visitor_count, wait_until)


class RedisServerTestCase(ServerTestCase):
    """A ServerTestCase whose spoold stores on a redis-server of its own (`cls.redis`)."""

    @classmethod
    def store_spec(cls):
        require_redis()
        data = os.path.join(cls.tmp.path, "redis")
        os.makedirs(data, exist_ok=True)
        cls.redis = Redis(data).start()
        return cls.redis.spec()

    @classmethod
    def tearDownClass(cls):
        try:
            super().tearDownClass()
        finally:
            if getattr(cls, "redis", None) is not None:
                cls.redis.stop()


class GuestbookRedisTest(GuestbookChecks, RedisServerTestCase):
    server_args = ("--threads", "2:8")

    def test_raw_keys(self):
        self.post("raw", "stored <as> is")
        html = self.page()
        self.assertEqual(self.redis.command("TYPE", "guestbook_remarks"), "list")
        last = self.redis.command("LRANGE", "guestbook_remarks", -1, -1)
        self.assertEqual(last, [b"raw\nstored <as> is"])
        self.assertEqual(int(self.redis.command("GET", "visitor_count")), visitor_count(html))

    def test_entries_written_by_zerohttpd_are_shown(self):
        # ZeroHTTPd pushes bare remarks (no name, no newline).
        self.redis.command("RPUSH", "guestbook_remarks", "from <ZeroHTTPd>")
        html = self.page()
        name, remarks = page_entries(html)[-1]
        self.assertEqual(remarks, "from &lt;ZeroHTTPd&gt;")

    def test_z_store_down_and_back(self):
        # Named to run last in this class: it restarts redis (empty, since it does not save).
        self.post("before", "the outage")
        port = self.redis.port
        self.redis.kill()
        try:
            resp = self.server.get("/guestbook")
            self.assertEqual(resp.status, 503, resp)
            self.assertIn(b"unavailable", resp.body.lower())
            self.assertEqual(self.server.post_form(
                "/guestbook", {"guest-name": "x", "guest-remarks": "while down"}).status, 503)
            resp = self.server.get("/hello.txt")
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, HELLO)
            health = self.server.get("/healthz")
            self.assertIn(health.status, (200, 503), health)
            self.assertIn(b"store: down", health.body)
            # The node alone is healthy: a balancer keeps sending it static requests.
            self.assertEqual(self.server.get("/healthz/node").status, 200)
            errors = self.server.metrics()["spoold_store_errors_total"]
            self.assertGreaterEqual(errors, 2)
            # stderr says why, once a second at most; the first failure at once.
            line = self.server.err.wait_for(lambda l: l.startswith("spoold: store: "), 30)
            self.assertIsNotNone(line, self.server.err.text())
            self.assertIn(str(port), line)
            self.assertTrue(line.rstrip().endswith("(calls failed since the last report: 1)"),
                            line)
        finally:
            type(self).redis = Redis(self.redis.dir, port=port).start()
        wait_until(lambda: self.server.get("/guestbook").status == 200, 60,
                   "the guestbook to work again after redis restarted")
        self.post("after", "the outage")
        self.assertIn(("after", "the outage"), page_entries(self.page()))
        self.assertIn(b"store: up", self.server.get("/healthz").body)


def redis_figure(redis, section, name):
    """A number of Redis's INFO section."""
    info = redis.command("INFO", section).decode()
    return int(next(line.split(":", 1)[1] for line in info.splitlines()
                    if line.startswith(name + ":")))


class ThreadedStoreConnectionsTest(RedisServerTestCase):
    """A thread per client, and the Redis store's connections shared by their calls: however
    many clients come and go at once, spoold holds at most --store-connections to Redis."""
    server_args = ("--model", "threaded", "--store-connections", "2")

    def test_many_clients_at_once_share_two_connections(self):
        before = redis_figure(self.redis, "stats", "total_connections_received")
        clients, each = 8, 10

        def visit():
            return [self.server.get("/guestbook").status for _ in range(each)]

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            statuses = [s for f in [pool.submit(visit) for _ in range(clients)]
                        for s in f.result()]
        self.assertEqual(statuses, [200] * (clients * each))
        # Each INFO comes on a connection of its own, which the second one counts.
        made = redis_figure(self.redis, "stats", "total_connections_received") - before - 1
        self.assertLessEqual(made, 2)
        self.assertEqual(int(self.redis.command("GET", "visitor_count")), clients * each)


if __name__ == "__main__":
    main()
