"""Slow clients against the models with a fixed number of workers (prethreaded's threads,
preforked's processes), each of which holds a connection until it closes: as many slow clients
as there are workers must not stop the server for everyone else. While every worker is busy and
a client waits for one, a worker whose connection only waits on its client (a request head, a
TLS handshake, a PROXY header, idle keep-alive) gives it up (server/limits/worker_pressure.hpp),
and counts it in spoold_connections_shed_total{state}; without that pressure, nothing is given
up.

Each test fills every worker but one with slow clients and the last with a watcher, a keep-alive
connection that reads /metrics until all of them are open; then another client is answered while
the slow ones are still connected and silent, with --header-timeout and --idle-timeout set far
longer than the test waits. Registered for prethreaded and preforked only
(tests/server/CMakeLists.txt); preforked in release builds only, as its other suites."""

import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_tls import client_context, get_over, make_ca, make_server_cert  # noqa: E402
from spoold_harness import (HELLO, MODEL, SCALE, Conn, SiteTestCase, Spoold,  # noqa: E402
                            build_request, main, parse_prometheus, wait_until)

SLOW = 8
WORKERS = SLOW + 1  # the slow clients and the watcher
NEVER = ("--header-timeout", "3600", "--idle-timeout", "3600", "--workers", str(WORKERS))
PARTIAL_HEAD = b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
PROXY = "127.0.0.4"
# Longer than a connection must wait on its client before it may be given up, and than the
# tick on which a worker looks at the pressure (shed_after, pressure_check_interval).
QUIET_WINDOW = 1.5

if MODEL not in ("prethreaded", "preforked"):
    raise SystemExit(f"slow_clients.py is for prethreaded and preforked, not {MODEL}")


def sheds(metrics):
    return {state: metrics[f'spoold_connections_shed_total{{state="{state}"}}']
            for state in ("handshake", "proxy_header", "head", "idle")}


class Watcher:
    """One keep-alive connection reading /metrics: plain, or over TLS with `ca`."""

    def __init__(self, server, ca=None):
        if ca is None:
            self.conn = Conn(server.port)
            self.tls = None
        else:
            raw = socket.create_connection(("127.0.0.1", server.port), 30 * SCALE)
            self.tls = client_context(ca).wrap_socket(raw, server_hostname="127.0.0.1")

    def metrics(self):
        if self.tls is not None:
            return parse_prometheus(get_over(self.tls, "/metrics")[2].decode())
        self.conn.send(build_request("GET", "/metrics"))
        return parse_prometheus(self.conn.read_final_response().body.decode())

    def close(self):
        (self.tls or self.conn).close()


class SlowClientsCase(SiteTestCase):
    def run_slow_clients(self, args, make_slow, expected_state, ca=None, check_slow=None):
        """SLOW connections from make_slow() hold every worker but the watcher's; then a client
        is answered while they stay connected and silent."""
        with Spoold(self.site, self.store, NEVER + tuple(args)) as server:
            slow = []
            watcher = None
            try:
                for _ in range(SLOW):
                    slow.append(make_slow(server))
                watcher = Watcher(server, ca)
                wait_until(lambda: watcher.metrics()["spoold_connections_open"] == WORKERS, 30,
                           "every worker to hold a connection")
                # No client waits for a worker: nothing is given up, however long they wait.
                time.sleep(QUIET_WINDOW)  # an observation window, not a synchronisation
                quiet = watcher.metrics()
                self.assertEqual(sum(sheds(quiet).values()), 0, sheds(quiet))
                self.assertEqual(quiet["spoold_connections_open"], WORKERS)

                # Another client: answered, though every worker held a connection.
                self.assertEqual(self.ninth(server, ca), HELLO)
                # The slow clients never closed; a worker gave one up (or the watcher's, idle
                # as well). Asked on a new connection: the watcher's may be the one given up.
                fresh = Watcher(server, ca)
                try:
                    after = sheds(fresh.metrics())
                finally:
                    fresh.close()
                self.assertGreaterEqual(after[expected_state] + after["idle"], 1, after)
                given_up = [s for s in slow if self.closed_by_server(s, check_slow)]
                self.assertLessEqual(len(given_up), sum(after.values()), after)
            finally:
                for s in slow:
                    s.close()
                if watcher is not None:
                    watcher.close()

    def ninth(self, server, ca):
        """GET /hello.txt on a new connection (over TLS with `ca`), waiting far longer than
        giving up a connection takes, far shorter than the timeouts."""
        if ca is None:
            with Conn(server.port, timeout=60) as c:
                c.send(build_request("GET", "/hello.txt", {"Connection": "close"}))
                resp = c.read_final_response()
                self.assertEqual(resp.status, 200, resp)
                return resp.body
        raw = socket.create_connection(("127.0.0.1", server.port), 60 * SCALE)
        with client_context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
            status, _, body = get_over(s, "/hello.txt")
            self.assertIn(" 200 ", status)
            return body

    @staticmethod
    def closed_by_server(sock, check):
        """True if the server has closed (or answered) `sock`; `check` asserts what it sent."""
        sock.setblocking(False)
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            data = b""
        if check is not None:
            check(data)
        return True


class SlowHeadsTest(SlowClientsCase):
    def test_partial_heads_do_not_hold_every_worker(self):
        def make_slow(server):
            s = socket.create_connection(("127.0.0.1", server.port), 30 * SCALE)
            s.sendall(PARTIAL_HEAD)
            return s

        def check(data):
            self.assertTrue(data == b"" or data.startswith(b"HTTP/1.1 408 "), data)
        self.run_slow_clients((), make_slow, "head", check_slow=check)


class IdleKeepAliveTest(SlowClientsCase):
    def test_idle_keep_alive_does_not_hold_every_worker(self):
        def make_slow(server):
            c = Conn(server.port)
            c.send(build_request("GET", "/hello.txt"))
            self.assertEqual(c.read_final_response().body, HELLO)
            return c.sock

        def check(data):
            self.assertEqual(data, b"")
        self.run_slow_clients((), make_slow, "idle", check_slow=check)


class StalledHandshakesTest(SlowClientsCase):
    def test_stalled_handshakes_do_not_hold_every_worker(self):
        make_ca(self.tmp.path, "one")
        cert = os.path.join(self.tmp.path, "server.pem")
        key = os.path.join(self.tmp.path, "server.key")
        make_server_cert(self.tmp.path, "one", cert, key)
        ca = os.path.join(self.tmp.path, "one.ca.pem")

        def make_slow(server):
            s = socket.create_connection(("127.0.0.1", server.port), 30 * SCALE)
            s.sendall(b"\x16\x03\x01")  # a handshake begun, never finished
            return s

        def check(data):
            self.assertEqual(data, b"")
        self.run_slow_clients(("--tls-only", "on", "--tls-cert", cert, "--tls-key", key),
                              make_slow, "handshake", ca=ca, check_slow=check)


class StalledProxyHeadersTest(SlowClientsCase):
    def test_stalled_proxy_headers_do_not_hold_every_worker(self):
        def make_slow(server):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(30 * SCALE)
            s.bind((PROXY, 0))
            s.connect(("127.0.0.1", server.port))
            s.sendall(b"PROXY TCP4 192.0.2.9 ")  # a header begun, never finished
            return s

        def check(data):
            self.assertEqual(data, b"")
        self.run_slow_clients(("--trust", f"{PROXY}/32", "--proxy-protocol"), make_slow,
                              "proxy_header", check_slow=check)


if __name__ == "__main__":
    main()
