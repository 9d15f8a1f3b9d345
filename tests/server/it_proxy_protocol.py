"""--proxy-protocol: a connection from a --trust peer starts with a PROXY header (v1 text or v2
binary), whose source address is the client for the access log, --max-connections-per-client
and --rate-limit; X-Forwarded-For is then ignored, and a LOCAL or UNKNOWN header leaves the
trusted peer as the client (unlimited). A missing, malformed, oversized, truncated or late
header closes the connection without an answer and counts in spoold_proxy_header_errors_total.
A PROXY header from an untrusted peer is no header at all: it is parsed as HTTP and refused
(501 for v1's unknown method "PROXY", 400 for v2's binary bytes).

Clients are told apart by binding their sockets to different loopback addresses: 127.0.0.4 is
the trusted proxy, 127.0.0.7 an untrusted peer. Where counts are per process (README.md,
"Per-client limits"), the tests that spread one client over several connections run only where
the count or bucket is shared, as in it_client_limits."""

import socket
import struct
import unittest

from spoold_harness import (HELLO, MODEL, SCALE, Conn, ServerTestCase, build_request, main,
                            run_spoold)

PROXY = "127.0.0.4"
UNTRUSTED = "127.0.0.7"
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
REFUSED_429 = (b"HTTP/1.1 429 Too Many Requests\r\n"
               b"Content-Type: text/plain; charset=utf-8\r\n"
               b"Content-Length: 40\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
               b"Too many connections from your address.\n")

ONE_PROCESS = MODEL not in ("forking", "preforked")
# Holding several connections at once: every model but iterative (one at a time).
CONCURRENT = MODEL != "iterative"


def v1(source, port=40000):
    family = "TCP6" if ":" in source else "TCP4"
    dest = "::1" if family == "TCP6" else "127.0.0.1"
    return f"PROXY {family} {source} {dest} {port} 80\r\n".encode()


def v2(source=None, port=40000, local=False, tlvs=b""):
    """A v2 header: PROXY from `source` (IPv4 or IPv6), or LOCAL."""
    if local:
        return V2_SIGNATURE + bytes([0x20, 0x00]) + struct.pack("!H", 0)
    if ":" in source:
        block = (socket.inet_pton(socket.AF_INET6, source) +
                 socket.inet_pton(socket.AF_INET6, "::1") + struct.pack("!HH", port, 80))
        family = 0x21
    else:
        block = (socket.inet_aton(source) + socket.inet_aton("127.0.0.1") +
                 struct.pack("!HH", port, 80))
        family = 0x11
    payload = block + tlvs
    return V2_SIGNATURE + bytes([0x21, family]) + struct.pack("!H", len(payload)) + payload


def conn_from(port, source=PROXY):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30 * SCALE)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return Conn(port, sock=s)


def get(c, path="/hello.txt", headers=None):
    c.send(build_request("GET", path, headers))
    return c.read_response()


class ProxyTestCase(ServerTestCase):
    def proxied(self, header, source=PROXY):
        """A connection from `source` that has sent `header`."""
        c = conn_from(self.server.port, source)
        c.send(header)
        return c

    def errors(self):
        return self.server.metrics().get("spoold_proxy_header_errors_total", 0)


class ClientAddressTest(ProxyTestCase):
    server_args = ("--trust", f"{PROXY}/32", "--proxy-protocol", "--access-log", "-")

    def logged(self, path):
        line = self.server.out.wait_for(lambda l: f"GET {path} " in l, 30 * SCALE)
        self.assertIsNotNone(line, f"no access-log line for {path}")
        return line

    def test_v1_and_v2_sources_are_the_client(self):
        cases = (("v1-tcp4", v1("192.0.2.10"), "192.0.2.10 "),
                 ("v1-tcp6", v1("2001:db8::10"), "2001:db8::10 "),
                 ("v2-inet", v2("192.0.2.11"), "192.0.2.11 "),
                 ("v2-inet6-tlv", v2("2001:db8::11", tlvs=b"\x04\x00\x03abc"), "2001:db8::11 "),
                 ("v1-unknown", b"PROXY UNKNOWN\r\n", PROXY + " "),
                 ("v2-local", v2(local=True), PROXY + " "))
        for name, header, expected in cases:
            with self.subTest(name=name), self.proxied(header) as c:
                # X-Forwarded-For never overrides the header.
                r = get(c, f"/hello.txt?{name}", {"X-Forwarded-For": "10.9.9.9"})
                self.assertEqual((r.status, r.body), (200, HELLO))
                # Kept alive: the next request is served as the same client, no header again.
                r = get(c, f"/hello.txt?{name}-again")
                self.assertEqual((r.status, r.body), (200, HELLO))
                self.assertTrue(self.logged(f"/hello.txt?{name}").startswith(expected))
                self.assertTrue(self.logged(f"/hello.txt?{name}-again").startswith(expected))

    def test_header_and_request_in_one_segment_or_in_pieces(self):
        request = build_request("GET", "/hello.txt", {"Connection": "close"})
        with conn_from(self.server.port) as c:
            c.send(v2("192.0.2.12") + request)
            r = c.read_response()
            self.assertEqual((r.status, r.body), (200, HELLO))
        for header in (v1("192.0.2.13"), v2("192.0.2.13")):
            with conn_from(self.server.port) as c:
                for i in range(0, len(header), 5):
                    c.send(header[i:i + 5])
                c.send(request)
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, HELLO))

    def test_untrusted_peer_header_is_plain_http(self):
        before = self.errors()
        # The HTTP parser's own answers: "PROXY" is no method it knows (501), and v2's binary
        # signature is no request line (400).
        for header, status in ((v1("192.0.2.14"), 501), (v2("192.0.2.14"), 400)):
            with self.subTest(header=header), self.proxied(header, UNTRUSTED) as c:
                c.send(build_request("GET", "/hello.txt?untrusted"))
                r = c.read_response()
                self.assertEqual(r.status, status, r.body)
                self.assertEqual(r.header("Connection"), "close")
        self.assertEqual(self.errors(), before, "an untrusted peer's bytes are not a header")
        # An untrusted peer without a header is served as ever.
        with conn_from(self.server.port, UNTRUSTED) as c:
            self.assertEqual(get(c, "/hello.txt?plain").status, 200)
        self.assertTrue(self.logged("/hello.txt?plain").startswith(UNTRUSTED + " "))


class BadHeaderTest(ProxyTestCase):
    server_args = ("--trust", f"{PROXY}/32", "--proxy-protocol", "--header-timeout", "1")

    def assert_closed_unanswered(self, data, shut=False):
        with conn_from(self.server.port) as c:
            c.send(data)
            if shut:
                c.sock.shutdown(socket.SHUT_WR)
            self.assertEqual(c.read_to_eof(), b"", f"answered {data[:40]!r}")

    def test_bad_headers_close_and_count(self):
        cases = (
            ("no header", build_request("GET", "/hello.txt"), False),
            ("bad address", b"PROXY TCP4 192.0.2.999 127.0.0.1 1 80\r\n", False),
            ("bad port", b"PROXY TCP4 192.0.2.1 127.0.0.1 65536 80\r\n", False),
            ("v6 under TCP4", b"PROXY TCP4 2001:db8::1 127.0.0.1 1 80\r\n", False),
            ("bare LF", b"PROXY TCP4 192.0.2.1 127.0.0.1 1 80\n", False),
            ("v1 oversized", b"PROXY UNKNOWN " + b"x" * 200, False),
            ("v2 version 1", V2_SIGNATURE + bytes([0x11, 0x11]) + struct.pack("!H", 12) +
             bytes(12), False),
            ("v2 short block", V2_SIGNATURE + bytes([0x21, 0x11]) + struct.pack("!H", 4) +
             bytes(4), False),
            ("v2 oversized", V2_SIGNATURE + bytes([0x21, 0x11]) + struct.pack("!H", 65535),
             False),
            ("truncated v1", v1("192.0.2.1")[:20], True),
            ("truncated v2", v2("192.0.2.1")[:20], True),
            ("TLS first", bytes([0x16, 0x03, 0x01, 0x00, 0x05]) + bytes(5), False),
        )
        before = self.errors()
        for name, data, shut in cases:
            with self.subTest(name=name):
                self.assert_closed_unanswered(data, shut)
        self.assertEqual(self.errors(), before + len(cases))

    def test_late_header_times_out(self):
        before = self.errors()
        for partial in (b"", v1("192.0.2.1")[:10], v2("192.0.2.1")[:14]):
            with self.subTest(partial=partial), conn_from(self.server.port) as c:
                c.send(partial)
                # --header-timeout (1 s) closes it; the socket's own timeout is far longer.
                self.assertEqual(c.read_to_eof(), b"")
        self.assertEqual(self.errors(), before + 3)
        self.assert_still_serving()


class LimitsTest(ProxyTestCase):
    server_args = ("--trust", f"{PROXY}/32", "--proxy-protocol", "--rate-limit", "1/m",
                   "--rate-burst", "2", "--max-connections-per-client", "2",
                   "--idle-timeout", "600")

    def burst(self, header, count=3, headers=None):
        with self.proxied(header) as c:
            return [get(c, headers=headers).status for _ in range(count)]

    def test_rate_limit_is_keyed_on_the_source(self):
        self.assertEqual(self.burst(v1("192.0.2.20"), headers={"X-Forwarded-For": "10.1.1.1"}),
                         [200, 200, 429])
        # Another source has its own bucket, whatever the peer.
        self.assertEqual(self.burst(v2("192.0.2.21")), [200, 200, 429])
        self.assertEqual(self.burst(v2("2001:db8::21")), [200, 200, 429])

    def test_rate_limit_spans_connections_of_a_source(self):
        self.assertEqual(self.burst(v2("192.0.2.22"), count=2), [200, 200])
        # Same source, new connection, v1 this time: the same bucket, still empty.
        self.assertEqual(self.burst(v1("192.0.2.22"), count=1), [429])
        # X-Forwarded-For does not buy a new bucket.
        self.assertEqual(self.burst(v1("192.0.2.22"), count=1,
                                    headers={"X-Forwarded-For": "10.2.2.2"}), [429])

    def test_local_and_unknown_leave_the_trusted_peer_unlimited(self):
        self.assertEqual(self.burst(v2(local=True), count=5), [200] * 5)
        self.assertEqual(self.burst(b"PROXY UNKNOWN\r\n", count=5), [200] * 5)

    def test_connection_limit_is_keyed_on_the_source(self):
        held = []
        try:
            for _ in range(2):
                c = self.proxied(v1("192.0.2.30"))
                held.append(c)
                self.assertEqual(get(c).status, 200)
            with self.proxied(v2("192.0.2.30")) as refused:
                refused.send(build_request("GET", "/hello.txt"))
                self.assertEqual(refused.read_to_eof(), REFUSED_429)
            # Another source behind the same proxy, and the proxy's own health checks, pass.
            with self.proxied(v2("192.0.2.31")) as other:
                self.assertEqual(get(other).status, 200)
            locals_ = [self.proxied(v2(local=True)) for _ in range(3)]
            held.extend(locals_)
            for c in locals_:
                self.assertEqual(get(c).status, 200)
        finally:
            for c in held:
                c.close()
        m = self.server.metrics()
        self.assertGreaterEqual(m["spoold_connections_refused_per_client_total"], 1)


# What applies where (the module's docstring): each model's suite holds the tests of what that
# model does. Buckets live in the process that serves the connection in forking and preforked;
# so does the count of a PROXY source in forking (taken after the header, by the child that
# reads it), while preforked's workers share theirs. iterative serves one connection at a time.
if not ONE_PROCESS:
    del LimitsTest.test_rate_limit_spans_connections_of_a_source
if not CONCURRENT or MODEL == "forking":
    del LimitsTest.test_connection_limit_is_keyed_on_the_source


class OptionErrorTest(unittest.TestCase):
    def test_bad_values_are_usage_errors(self):
        for args in (["--proxy-protocol"],
                     ["--proxy-protocol=maybe", "--trust", "127.0.0.1"],
                     ["--proxy-protocol=on"]):
            with self.subTest(args=args):
                p = run_spoold(args)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--proxy-protocol", p.stderr)


if __name__ == "__main__":
    main()
