"""Per-client limits: --max-connections-per-client refuses a client's connections past the
limit with 429 (and an end-of-file) while other clients are served; --rate-limit answers a
client's requests past its bucket with 429 and Retry-After on a connection that stays usable;
--trust exempts a proxy and limits the client named by its X-Forwarded-For instead. Clients are
told apart by binding their sockets to different loopback addresses (127.0.0.0/8 is all local).

The connection count is one per server in every model (preforked's workers share it in shared
memory, and a worker killed while serving gives its count back through the supervisor:
KilledWorkerTest). Buckets are per process (README.md, "Per-client limits"): in forking and
preforked a bucket lives in the process that serves the connection, so the tests that spread one
client's requests over several connections run only where one process serves them all."""

import concurrent.futures
import os
import signal
import socket
import unittest

from spoold_harness import (HELLO, MODEL, SCALE, Conn, ServerTestCase, SiteTestCase, Spoold,
                            build_request, main, run_spoold, wait_until)

REFUSED_429 = (b"HTTP/1.1 429 Too Many Requests\r\n"
               b"Content-Type: text/plain; charset=utf-8\r\n"
               b"Content-Length: 40\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
               b"Too many connections from your address.\n")

ONE_PROCESS = MODEL not in ("forking", "preforked")


def conn_from(port, source, server="127.0.0.1"):
    """A connection to the server from loopback address `source`."""
    family = socket.AF_INET6 if ":" in source else socket.AF_INET
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(30 * SCALE)
    s.bind((source, 0))
    s.connect((server, port))
    return Conn(port, sock=s)


def get_on(c, path="/hello.txt", headers=None):
    c.send(build_request("GET", path, headers))
    return c.read_response()


def fetch_from(port, source, headers=None):
    """One request on a fresh connection from `source`: the response."""
    with conn_from(port, source) as c:
        return get_on(c, headers={"Connection": "close", **(headers or {})})


def refused_from(port, source):
    """Connects from `source`, sends a request and reads to the end: what it read."""
    with conn_from(port, source) as c:
        c.send(build_request("GET", "/hello.txt"))
        return c.read_to_eof()


def served_from(test, source):
    """A connection from `source` on test's server that has been served (so surely counted),
    or None when it was refused with 429 (its place not back yet)."""
    c = conn_from(test.server.port, source)
    r = get_on(c)
    if r.status == 429:
        c.close()
        return None
    test.assertEqual((r.status, r.body), (200, HELLO))
    return c


class ConnectionLimitTest(ServerTestCase):
    LIMIT = 20
    server_args = ("--max-connections-per-client", str(LIMIT), "--idle-timeout", "600",
                   "--header-timeout", "600")

    def hold(self, source):
        """A connection from `source` that has been served (so surely counted)."""
        c = served_from(self, source)
        self.assertIsNotNone(c, "refused below the limit")
        return c

    def test_one_client_cannot_take_every_slot(self):
        held = []
        try:
            for _ in range(self.LIMIT):
                held.append(self.hold("127.0.0.2"))
            with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
                refused = pool.map(refused_from, [self.server.port] * 10, ["127.0.0.2"] * 10)
                normal = [fetch_from(self.server.port, "127.0.0.3") for _ in range(200)]
                refused = list(refused)
            self.assertEqual([r for r in refused if r != REFUSED_429], [],
                             "a connection past the limit did not read the whole 429 and EOF")
            self.assertEqual([r.status for r in normal if r.status != 200], [],
                             "another client's request failed")
            # The held connections are still served.
            for c in held:
                r = get_on(c)
                self.assertEqual((r.status, r.body), (200, HELLO))

            # Closing five gives back exactly five places.
            for c in held[:5]:
                c.close()
            del held[:5]
            for _ in range(5):
                held.append(wait_until(lambda: served_from(self, "127.0.0.2"), 30,
                                       "a place of a closed connection to come back"))
            self.assertEqual(refused_from(self.server.port, "127.0.0.2"), REFUSED_429)
        finally:
            for c in held:
                c.close()
        m = self.server.metrics()
        self.assertGreaterEqual(m["spoold_connections_refused_per_client_total"], 11)
        self.assertEqual(m["spoold_connections_refused_total"], 0)
        self.assertGreaterEqual(m['spoold_requests_total{code="429"}'], 11)


class KilledWorkerTest(ServerTestCase):
    """preforked: a worker killed while it serves a connection cannot give its client's count
    back itself; the supervisor does when it reaps the worker."""
    server_args = ("--max-connections-per-client", "1", "--workers", "4",
                   "--idle-timeout", "600")

    def serving_worker(self, client_port):
        """The pid of the worker whose socket is connected to `client_port`."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                    if local_port == self.server.port and remote_port == client_port:
                        inodes.add(f"socket:[{fields[9]}]")
        parent = self.server.proc.pid
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != parent:
                    continue
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
            except (FileNotFoundError, ProcessLookupError, PermissionError):
                continue
        self.fail(f"no worker holds the connection from port {client_port}")

    def test_dead_workers_count_comes_back(self):
        with conn_from(self.server.port, "127.0.0.2") as held:
            self.assertEqual(get_on(held).status, 200)
            # The limit holds across workers: a second connection is refused by another one.
            self.assertEqual(refused_from(self.server.port, "127.0.0.2"), REFUSED_429)
            os.kill(self.serving_worker(held.sock.getsockname()[1]), signal.SIGKILL)
            self.assertEqual(held.read_to_eof(), b"")
        # Reaped within the supervisor's 100 ms turn: the place is back.
        c = wait_until(lambda: served_from(self, "127.0.0.2"), 30,
                       "the dead worker's count to return")
        c.close()
        self.assertIsNotNone(self.server.err.wait_for(lambda l: "killed by signal 9" in l,
                                                      30 * SCALE))


class DualStackTest(SiteTestCase):
    """--bind ::: an IPv4 client (a v4-mapped peer) counts as its IPv4 address, apart from an
    IPv6 one."""

    def test_v4_mapped_peer_counts_as_ipv4(self):
        try:
            with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
                s.bind(("::1", 0))
        except OSError as e:
            self.fail(f"this machine has no IPv6 loopback address (::1): {e}")
        server = Spoold(self.site, self.store, ["--bind", "::", "--max-connections-per-client",
                                                "1", "--idle-timeout", "600"])
        server.start()
        try:
            with conn_from(server.port, "127.0.0.2") as held:
                self.assertEqual(get_on(held).status, 200)
                with conn_from(server.port, "127.0.0.2") as refused:
                    refused.send(build_request("GET", "/hello.txt"))
                    self.assertEqual(refused.read_to_eof(), REFUSED_429)
                with conn_from(server.port, "::1", "::1") as other:
                    self.assertEqual(get_on(other).status, 200)
        finally:
            server.stop()


class RateLimitTest(ServerTestCase):
    """One connection: its process's bucket, in every model. One token a minute: the burst is
    what decides, whatever the time between the requests (a test takes far less than a
    minute), and a 429 tells how long until the next token."""
    server_args = ("--rate-limit", "1/m", "--rate-burst", "5")

    def test_burst_then_429_on_a_usable_connection(self):
        with conn_from(self.server.port, "127.0.0.5") as c:
            statuses = [get_on(c).status for _ in range(5)]
            self.assertEqual(statuses, [200] * 5)
            r = get_on(c)
            self.assertEqual(r.status, 429, r.body)
            self.assertIsNone(r.header("Connection"), "a 429 must not close")
            self.assertTrue(1 <= int(r.header("Retry-After")) <= 60, r.header("Retry-After"))
            # Still open: the same connection answers its next request (429 again: no token).
            self.assertEqual(get_on(c).status, 429)
        m = self.server.metrics()
        self.assertEqual(m["spoold_requests_rate_limited_total"], 2)


class RateRefillTest(ServerTestCase):
    """A bucket refills: at 1000 requests a second, a client that emptied its bucket of one is
    served again on the same connection."""
    server_args = ("--rate-limit", "1000/s", "--rate-burst", "1")

    def test_served_again_once_a_token_is_back(self):
        with conn_from(self.server.port, "127.0.0.5") as c:
            self.assertEqual(get_on(c).status, 200)
            wait_until(lambda: get_on(c).status == 200, 30,
                       "the rate-limited connection to be served again")


class TrustTest(ServerTestCase):
    server_args = ("--rate-limit", "1/m", "--rate-burst", "2", "--max-connections-per-client", "2",
                   "--trust", "10.0.0.0/8,127.0.0.4/32", "--idle-timeout", "600",
                   "--access-log", "-")

    def burst(self, source, forwarded=None, count=3):
        headers = {"X-Forwarded-For": forwarded} if forwarded else {}
        with conn_from(self.server.port, source) as c:
            return [get_on(c, headers=headers).status for _ in range(count)]

    def test_forwarded_clients_have_their_own_buckets(self):
        self.assertEqual(self.burst("127.0.0.4", "10.1.2.3"), [200, 200, 429])
        self.assertEqual(self.burst("127.0.0.4", "10.1.2.3", count=1), [429])
        # The last address is the one the proxy saw; each has its own bucket.
        self.assertEqual(self.burst("127.0.0.4", "10.1.2.3, 10.1.2.4"), [200, 200, 429])

    def test_trusted_peer_is_not_limited(self):
        self.assertEqual(self.burst("127.0.0.4", count=6), [200] * 6)
        held = [conn_from(self.server.port, "127.0.0.4") for _ in range(4)]
        try:
            for c in held:
                self.assertEqual(get_on(c).status, 200)
        finally:
            for c in held:
                c.close()

    def logged(self, path):
        """The access-log line (on spoold's stdout) of the request for `path`."""
        line = self.server.out.wait_for(lambda l: f"GET {path} " in l, 30 * SCALE)
        self.assertIsNotNone(line, f"no access-log line for {path}")
        return line

    def test_access_log_names_the_forwarded_client_of_a_trusted_peer(self):
        for source, path in (("127.0.0.4", "/hello.txt?trusted"),
                             ("127.0.0.7", "/hello.txt?untrusted")):
            with conn_from(self.server.port, source) as c:
                self.assertEqual(get_on(c, path, {"X-Forwarded-For": "10.7.7.7"}).status, 200)
        self.assertTrue(self.logged("/hello.txt?trusted").startswith("10.7.7.7 "))
        self.assertTrue(self.logged("/hello.txt?untrusted").startswith("127.0.0.7 "))

    def test_forwarded_for_from_untrusted_peer_is_ignored(self):
        self.assertEqual(self.burst("127.0.0.6", "10.1.2.5"), [200, 200, 429])
        # Another forwarded address does not give the same peer a new bucket.
        self.assertEqual(self.burst("127.0.0.6", "10.1.2.6", count=1), [429])


# What applies where (the module's docstring): the suite of each model holds the tests of what
# that model does, and only those.
if MODEL != "preforked":
    del KilledWorkerTest
if not ONE_PROCESS:
    del TrustTest


class OptionErrorTest(unittest.TestCase):
    def test_bad_values_are_usage_errors(self):
        for args in (["--max-connections-per-client", "-1"],
                     ["--max-connections-per-client", "x"],
                     ["--rate-limit", "fast"],
                     ["--rate-limit", "5", "--rate-burst", "0"],
                     ["--rate-limit", "5/h"],
                     ["--rate-limit", "/m"],
                     ["--rate-burst", "5"],
                     ["--trust", "127.0.0.1/33"],
                     ["--trust", "::1/129"],
                     ["--trust", "10.0.0.0/8,"],
                     ["--trust", "example.com"]):
            with self.subTest(args=args):
                p = run_spoold(args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--", p.stderr)


if __name__ == "__main__":
    main()
