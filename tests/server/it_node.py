"""spoold as a node of a fleet, on its own: --node-name (the Spoold-Node header on every answer,
the guestbook's pages, /metrics labels, /api/stats, /healthz), post keys in the guestbook's
form (a replayed post is stored once, on SQLite here; it_sentinel does Redis), the drain on
SIGTERM (--drain-delay: /healthz answers 503 while everything else is still served, each
answer closes its connection), and a trusted balancer's kept-alive connections
(--trust-idle-timeout; at the stop an idle one stays open until its next request, answered with
Connection: close, or until the balancer closes it)."""

import json
import re
import signal
import socket
import threading

from spoold_harness import (HELLO, SCALE, Conn, ServerTestCase, SiteTestCase, Spoold,
                            build_request, entry_total, main, page_entries, wait_until)

NODE = "web-7.a"


def post_key_of(html):
    m = re.search(r'<input type="hidden" name="post-key" id="post-key" value="([0-9a-f]+)">',
                  html)
    if not m:
        raise AssertionError(f"no post-key field in the form:\n{html[:3000]}")
    return m.group(1)


class NodeNameTest(ServerTestCase):
    server_args = ("--node-name", NODE)

    def test_every_answer_names_the_node(self):
        cases = [("GET", "/hello.txt", None), ("HEAD", "/hello.txt", None),
                 ("GET", "/guestbook", None), ("HEAD", "/guestbook", None),
                 ("GET", "/healthz", None), ("GET", "/metrics", None),
                 ("GET", "/api/stats", None), ("GET", "/no-such-file", None),
                 ("DELETE", "/hello.txt", None), ("GET", "/dashboard", None)]
        for method, path, body in cases:
            with self.subTest(method=method, path=path):
                resp = self.server.get(path, method=method, body=body)
                self.assertEqual(resp.header_all("Spoold-Node"), [NODE], resp)
        resp = self.server.post_form("/guestbook", {"guest-name": "n", "guest-remarks": "r"})
        self.assertEqual(resp.status, 303)
        self.assertEqual(resp.header("Spoold-Node"), NODE)
        resp = self.server.post_form("/guestbook", {"guest-name": "", "guest-remarks": "r"})
        self.assertEqual(resp.status, 400)
        self.assertEqual(resp.header("Spoold-Node"), NODE)

    def test_guestbook_page_shows_the_node(self):
        html = self.server.get("/guestbook").body.decode()
        self.assertIn(f'served by <span id="node-name">{NODE}</span>', html)

    def test_metrics_and_stats_carry_the_node(self):
        text = self.server.get("/metrics").body.decode()
        samples = [l for l in text.splitlines() if l and not l.startswith("#")]
        self.assertGreater(len(samples), 10)
        for line in samples:
            self.assertIn(f'node="{NODE}"', line)
        stats = json.loads(self.server.get("/api/stats").body)
        self.assertEqual(stats["node"], NODE)
        self.assertIn(f"node: {NODE}", self.server.get("/healthz").body.decode())


class NoNodeNameTest(ServerTestCase):
    def test_nothing_names_a_node(self):
        resp = self.server.get("/hello.txt")
        self.assertIsNone(resp.header("Spoold-Node"))
        self.assertNotIn(b"node-name", self.server.get("/guestbook").body)
        self.assertNotIn("node", json.loads(self.server.get("/api/stats").body))
        self.assertNotIn(b"node=", self.server.get("/metrics").body)


class PostKeyTest(ServerTestCase):
    """Post keys on the SQLite store."""

    def page(self):
        resp = self.server.get("/guestbook")
        self.assertEqual(resp.status, 200, resp)
        return resp.body.decode()

    def post(self, fields):
        return self.server.post_form("/guestbook", fields)

    def remarks(self):
        return [r for _, r in page_entries(self.page())]

    def test_every_page_has_a_fresh_key(self):
        keys = {post_key_of(self.page()) for _ in range(5)}
        self.assertEqual(len(keys), 5)
        for k in keys:
            self.assertRegex(k, r"^[0-9a-f]{32}$")

    def test_the_same_form_twice_is_stored_once(self):
        key = post_key_of(self.page())
        before = entry_total(self.page())
        replays = self.server.metrics()["spoold_guestbook_replays_total"]
        fields = {"guest-name": "Ann", "guest-remarks": "sent twice", "post-key": key}
        for _ in range(3):
            resp = self.post(fields)
            self.assertEqual(resp.status, 303, resp)
            self.assertEqual(resp.header("Location"), "/guestbook")
        self.assertEqual(entry_total(self.page()), before + 1)
        self.assertEqual(self.remarks().count("sent twice"), 1)
        self.assertEqual(self.server.metrics()["spoold_guestbook_replays_total"], replays + 2)

    def test_concurrent_replays_store_one_entry(self):
        key = post_key_of(self.page())
        before = entry_total(self.page())
        fields = {"guest-name": "Bob", "guest-remarks": "raced", "post-key": key}
        statuses = []

        def send():
            statuses.append(self.post(fields).status)

        threads = [threading.Thread(target=send) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(statuses, [303] * 8)
        self.assertEqual(entry_total(self.page()), before + 1)

    def test_without_a_key_each_post_is_stored(self):
        # ZeroHTTPd's form has no post-key field.
        before = entry_total(self.page())
        for _ in range(2):
            self.assertEqual(self.post({"guest-name": "Cy", "guest-remarks": "keyless"}).status,
                             303)
        self.assertEqual(entry_total(self.page()), before + 2)

    def test_malformed_key_is_refused(self):
        before = entry_total(self.page())
        for key in ("k" * 65, "has space", "dot.ted", "é"):
            with self.subTest(key=key):
                resp = self.post({"guest-name": "D", "guest-remarks": "r", "post-key": key})
                self.assertEqual(resp.status, 400, resp)
                self.assertIn(b"post key", resp.body)
        self.assertEqual(entry_total(self.page()), before)


class DrainTest(SiteTestCase):
    """--drain-delay: on SIGTERM, /healthz fails first while everything is still served."""

    def test_healthz_fails_while_everything_else_is_served(self):
        # Long enough that it cannot run out during the test; a second SIGTERM ends it.
        server = Spoold(self.site, self.store, ["--drain-delay", "600", "--node-name", "d1"])
        server.start()
        try:
            self.assertEqual(server.get("/healthz").status, 200)
            health = server.get("/healthz/node")
            self.assertEqual((health.status, health.body), (200, b"ok\nnode: d1\n"))
            with Conn(server.port) as kept:  # a keep-alive connection from before the signal
                kept.send(build_request("GET", "/hello.txt"))
                self.assertEqual(kept.read_final_response().status, 200)
                server.send_signal(signal.SIGTERM)
                wait_until(lambda: server.get("/healthz").status == 503, 30,
                           "/healthz to answer 503 once draining")
                health = server.get("/healthz")
                self.assertEqual(health.body, b"draining\nnode: d1\n")
                self.assertEqual(health.header("Spoold-Node"), "d1")
                health = server.get("/healthz/node")
                self.assertEqual((health.status, health.body), (503, b"draining\nnode: d1\n"))
                # Printed before the drain begins, but read from the pipe by another thread:
                # wait for it rather than read what that thread has collected so far.
                self.assertIsNotNone(server.out.wait_for(
                    lambda l: "draining (/healthz answers 503 for 600.0 s)" in l, 10 * SCALE),
                    server.out.text())
                # Still serving: new connections, the kept one, the guestbook, posts. Each
                # answer now closes its connection, so that a client reusing connections (a
                # balancer) never has one closed under a request it is sending.
                resp = server.get("/hello.txt")
                self.assertEqual((resp.status, resp.body), (200, HELLO))
                kept.send(build_request("GET", "/hello.txt"))
                resp = kept.read_final_response()
                self.assertEqual((resp.status, resp.header("Connection")), (200, "close"), resp)
                self.assertEqual(kept.read_to_eof(), b"")
                self.assertEqual(server.get("/guestbook").status, 200)
                self.assertEqual(server.post_form(
                    "/guestbook", {"guest-name": "d", "guest-remarks": "while draining"}).status,
                    303)
                self.assertIn(("d", "while draining"), page_entries(
                    server.get("/guestbook").body.decode()))
            server.send_signal(signal.SIGTERM)
            server.wait(60)
            server.check_clean_exit()
            out = server.out.text()
            self.assertIn("SIGTERM: draining cut short", out)
            self.assertLess(out.index("draining ("), out.index("shutting down"))
        finally:
            if server.alive():
                server.kill()

    def test_drain_ends_by_itself(self):
        server = Spoold(self.site, self.store, ["--drain-delay", "0.2"])
        server.start()
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        server.check_clean_exit()
        out = server.out.text()
        self.assertIn("SIGTERM: draining (/healthz answers 503 for 0.2 s)", out)
        self.assertNotIn("cut short", out)
        self.assertLess(out.index("draining ("), out.index("shutting down"))

    def test_no_drain_by_default(self):
        server = Spoold(self.site, self.store)
        server.start()
        server.send_signal(signal.SIGTERM)
        server.wait(60)
        server.check_clean_exit()
        self.assertNotIn("draining", server.out.text())



def untrusted_conn(port):
    """A client connection from 127.0.0.2, which the tests below do not trust."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.2", 0))
    s.settimeout(30)
    s.connect(("127.0.0.1", port))
    return Conn(port, sock=s)


class TrustedBalancerTest(SiteTestCase):
    """A --trust peer (here 127.0.0.1, where the harness connects from) is a balancer that
    keeps idle connections and reuses them: the node does not close one under it."""

    def start(self, *args):
        server = Spoold(self.site, self.store, ["--trust", "127.0.0.1", *args])
        server.start()
        self.addCleanup(lambda: server.alive() and server.kill())
        return server

    def answered(self, conn, path="/hello.txt"):
        conn.send(build_request("GET", path))
        return conn.read_final_response()

    def test_trusted_idle_connection_is_not_closed_by_the_idle_timeout(self):
        server = self.start("--trust-idle-timeout", "0", "--idle-timeout", "1")
        with Conn(server.port) as trusted:
            self.assertEqual(self.answered(trusted).status, 200)
            with untrusted_conn(server.port) as other:
                self.assertEqual(self.answered(other).status, 200)
                # --idle-timeout closes the untrusted one, idle for less time than the other.
                self.assertEqual(other.read_to_eof(), b"")
            resp = self.answered(trusted)
            self.assertEqual((resp.status, resp.body), (200, HELLO))
            self.assertIsNone(resp.header("Connection"))

    def test_trust_idle_timeout_closes_trusted_idle_connections(self):
        server = self.start("--trust-idle-timeout", "1", "--idle-timeout", "600")
        with Conn(server.port) as trusted:
            self.assertEqual(self.answered(trusted).status, 200)
            self.assertEqual(trusted.read_to_eof(), b"")

    def test_stop_leaves_trusted_idle_connections_open_until_their_next_answer(self):
        # One loop, so that the untrusted connection's close shows the stop has reached the
        # loop that holds the trusted ones; a long grace, so that an exit before it ends shows
        # that the server did not wait for it.
        server = self.start("--trust-idle-timeout", "0", "--loops", "1", "--grace", "600",
                            "--drain-delay", "600")
        trusted = [Conn(server.port) for _ in range(2)]
        try:
            for c in trusted:
                self.assertEqual(self.answered(c).status, 200)
            other = untrusted_conn(server.port)
            self.assertEqual(self.answered(other).status, 200)
            server.send_signal(signal.SIGTERM)
            wait_until(lambda: server.get("/healthz").status == 503, 30,
                       "/healthz to answer 503 once draining")
            server.send_signal(signal.SIGTERM)  # ends the drain: the stop begins
            # An idle untrusted connection is closed at the stop, without an answer.
            self.assertEqual(other.read_to_eof(), b"")
            other.close()
            # The idle trusted ones are still open: a request sent now is answered, and then
            # the connection closes.
            for c in trusted:
                resp = self.answered(c)
                self.assertEqual((resp.status, resp.body), (200, HELLO))
                self.assertEqual(resp.header("Connection"), "close")
                self.assertEqual(c.read_to_eof(), b"")
            server.wait(60)
            server.check_clean_exit()
        finally:
            for c in trusted:
                c.close()

    def test_stop_ends_when_the_balancer_closes_its_idle_connections(self):
        server = self.start("--trust-idle-timeout", "0", "--loops", "1", "--grace", "600")
        with Conn(server.port) as trusted:
            self.assertEqual(self.answered(trusted).status, 200)
            with untrusted_conn(server.port) as other:
                self.assertEqual(self.answered(other).status, 200)
                server.send_signal(signal.SIGTERM)
                self.assertEqual(other.read_to_eof(), b"")
            self.assertTrue(server.alive(), "spoold exited with a trusted connection open")
        server.wait(60)  # the balancer closed it: nothing is left to wait for
        server.check_clean_exit()


if __name__ == "__main__":
    main()
