"""Observability routes: /metrics (Prometheus text), /healthz and /api/stats (JSON)."""

import json

from spoold_harness import (HELLO, MODEL, Conn, ServerTestCase, SiteTestCase, Spoold,
                            build_request, main, parse_prometheus, wait_until)

REQUIRED_METRICS = (
    "spoold_response_bytes_total", "spoold_connections_open", "spoold_connections_accepted_total",
    "spoold_connections_refused_total", "spoold_connections_refused_per_client_total",
    "spoold_loop_yields_total",
    "spoold_requests_rate_limited_total", "spoold_store_errors_total", "spool_threads_live",
    "spool_threads_busy", "spool_queue_depth", "spool_tasks_submitted_total",
    "spool_tasks_completed_total", "spool_tasks_failed_total", "spool_tasks_stolen_total",
    "spool_tasks_rejected_total",
)


class MetricsTest(ServerTestCase):
    server_args = ("--threads", "2:8")

    def test_prometheus_text(self):
        resp = self.server.get("/metrics")
        self.assertEqual(resp.status, 200, resp)
        self.assertTrue(resp.header("Content-Type", "").startswith("text/plain"), resp)
        text = resp.body.decode()
        samples = parse_prometheus(text)
        for name in REQUIRED_METRICS:
            with self.subTest(metric=name):
                self.assertIn(name, samples)
                self.assertIn(f"# TYPE {name} ", text)
        self.assertGreaterEqual(samples["spool_threads_live"], 2)
        self.assertLessEqual(samples["spool_threads_live"], 8)
        self.assertGreaterEqual(samples["spoold_connections_open"], 1)  # this one

    def test_counts_increase(self):
        before = self.server.metrics()
        for _ in range(10):
            self.assertEqual(self.server.get("/hello.txt").status, 200)
        for _ in range(3):
            self.assertEqual(self.server.get("/missing").status, 404)
        for _ in range(4):
            self.assertEqual(self.server.get("/guestbook").status, 200)
        after = self.server.metrics()

        def delta(key):
            return after.get(key, 0) - before.get(key, 0)

        self.assertGreaterEqual(delta('spoold_requests_total{code="200"}'), 14)
        self.assertGreaterEqual(delta('spoold_requests_total{code="404"}'), 3)
        self.assertGreaterEqual(delta("spoold_connections_accepted_total"), 17)
        self.assertGreater(delta("spoold_response_bytes_total"), 10 * len(b"Hello"))
        self.assertEqual(delta("spoold_store_errors_total"), 0)
        # What runs on the pool depends on the model (server/models/README.md): epoll posts the
        # guestbook's store calls, queue posts every connection (17 here, one per request, and
        # the two /metrics fetches'), the others never use it. A task counts as completed only
        # after it returned, which may be just after its response went out: poll for the last.
        tasks = {"epoll": 4, "queue": 17}.get(MODEL)
        if tasks is None:
            self.assertEqual(delta("spool_tasks_submitted_total"), 0)
            return
        self.assertGreaterEqual(delta("spool_tasks_submitted_total"), tasks)
        wait_until(lambda: self.server.metrics()["spool_tasks_completed_total"]
                   - before["spool_tasks_completed_total"] >= tasks, 30,
                   "the pool to count the model's tasks as completed")

    def test_healthz(self):
        resp = self.server.get("/healthz")
        self.assertEqual(resp.status, 200, resp)
        self.assertTrue(resp.body.startswith(b"ok\n"), resp)
        self.assertIn(b"store: up", resp.body)
        head = self.server.get("/healthz", method="HEAD")
        self.assertEqual(head.status, 200)
        self.assertEqual(head.header("Content-Length"), str(len(resp.body)))

    def test_healthz_node_does_not_ask_the_store(self):
        resp = self.server.get("/healthz/node")
        self.assertEqual((resp.status, resp.body), (200, b"ok\n"), resp)
        head = self.server.get("/healthz/node", method="HEAD")
        self.assertEqual((head.status, head.body), (200, b""), head)
        self.assertEqual(head.header("Content-Length"), "3")
        self.assertEqual(self.server.get("/healthz/node", method="POST", body=b"").status, 405)

    def test_api_stats_json(self):
        resp = self.server.get("/api/stats")
        self.assertEqual(resp.status, 200, resp)
        self.assertTrue(resp.header("Content-Type", "").startswith("application/json"), resp)
        first = json.loads(resp.body)
        for key in ("uptime_s", "time_ms", "requests", "status", "bytes_sent",
                    "connections_open", "connections_accepted", "connections_refused",
                    "loop_yields", "store_errors", "pool"):
            with self.subTest(key=key):
                self.assertIn(key, first)
        for key in ("threads_live", "threads_busy", "queued", "submitted", "completed",
                    "rejected", "stolen"):
            with self.subTest(pool_key=key):
                self.assertIn(key, first["pool"])
                self.assertIsInstance(first["pool"][key], int)
        with Conn(self.server.port) as c:
            for _ in range(5):
                c.send(build_request("GET", "/hello.txt"))
                c.read_final_response()
        second = json.loads(self.server.get("/api/stats").body)
        self.assertGreaterEqual(second["requests"], first["requests"] + 5)
        self.assertGreaterEqual(second["time_ms"], first["time_ms"])
        self.assertGreaterEqual(second["uptime_s"], first["uptime_s"])

    def test_metrics_not_cached(self):
        resp = self.server.get("/metrics")
        self.assertIn("no-store", resp.header("Cache-Control", ""))


class LoopSliceTest(SiteTestCase):
    """--loop-slice: an event loop that has held its core for a slice yields it, and counts it in
    spoold_loop_yields_total; a slice of 0 never yields. Only the epoll model's loops yield
    (server/models/README.md); in the others the counter stays 0."""

    # Turns of at most 32 requests each (connection.hpp's requests_per_turn), one after another
    # without a wait: about 30 of them.
    PIPELINED = 1000

    def yields_serving_a_pipelined_burst(self, slice_us):
        with Spoold(self.site, self.store, ("--loops", "1", "--loop-slice", str(slice_us))) as s:
            before = s.metrics()["spoold_loop_yields_total"]
            with Conn(s.port) as c:
                c.send(build_request("GET", "/hello.txt") * self.PIPELINED)
                for _ in range(self.PIPELINED):
                    resp = c.read_final_response()
                    self.assertEqual((resp.status, resp.body), (200, HELLO))
            return s.metrics()["spoold_loop_yields_total"] - before

    def test_a_loop_that_held_its_core_a_slice_yields(self):
        # A slice of 1 us: serving a turn of requests takes longer than that, so before each wait
        # the loop reads its context switches, and yields when none happened since the last
        # reading: after any two turns of the burst that the scheduler did not interrupt.
        yields = self.yields_serving_a_pipelined_burst(1)
        if MODEL == "epoll":
            self.assertGreaterEqual(yields, 1)
        else:
            self.assertEqual(yields, 0)

    def test_a_slice_of_zero_never_yields(self):
        self.assertEqual(self.yields_serving_a_pipelined_burst(0), 0)


if __name__ == "__main__":
    main()
