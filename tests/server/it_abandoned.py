"""Connections the client abandoned: it sent part of a request head (or of a PROXY header, or
of a TLS handshake, or a TLS handshake and part of a head) and closed its socket at once. Each
is released as soon as the server reads it, whatever the header timeout: the server reads the
client's end of stream behind the data, in every model, with and without TLS and the PROXY
header.

The data and the client's FIN are sent in one TCP segment (TCP_CORK holds the data until close()
attaches the FIN to it), so they reach the server together: an edge-triggered server that took
the short read of the data for "drained" would never see the end, since no new readiness comes
for it (server/conn/transport.hpp, the short-read contract). The header and idle timeouts are
set far longer than the tests wait, so that only reading the end can release a connection.

The burst test fills a small --max-connections with such connections: once they are abandoned,
a new client is served again (it is refused with 503 for as long as they are held)."""

import os
import selectors
import socket
import ssl
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from it_load import open_many  # noqa: E402
from it_tls import (client_context, get_over, make_ca, make_server_cert, tls_args,  # noqa: E402
                    tls_connect)
from spoold_harness import (HELLO, MODEL, SCALE, Conn, SiteTestCase, Spoold, main,  # noqa: E402
                            parse_prometheus, scaled, wait_until)

COUNT = scaled(300, 100)
# Long enough that no timeout releases a connection while a test waits (bounded by 60 s).
NEVER = ("--header-timeout", "3600", "--idle-timeout", "3600")
PARTIAL_HEAD = b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
# The first bytes of a TLS record holding a ClientHello: the handshake is never complete.
PARTIAL_CLIENT_HELLO = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32)
PROXY = "127.0.0.4"  # the trusted peer that sends PROXY headers
# The server's own address: the tests count every connection it takes, and a client of another
# test retrying a closed port on 127.0.0.1 must not be among them (Spoold's `host`).
HOST = "127.0.0.21"
PROXY_V1 = b"PROXY TCP4 192.0.2.9 127.0.0.1 40000 80\r\n"
# A v2 header cut after its signature and version byte.
PROXY_V2_PARTIAL = b"\r\n\r\n\x00\r\nQUIT\n\x21"
# queue runs handshakes on a stage that reads TLS from the first byte: no PROXY header with TLS.
TLS_AND_PROXY = MODEL != "queue"


def corked_socket(port, source=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(30 * SCALE)
    if source:
        s.bind((source, 0))
    s.connect((HOST, port))
    return s


def send_and_close(s, data):
    """data and the FIN in one segment: corked, the data waits for close() to send both."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    s.sendall(data)
    s.close()


class Abandoner:
    """Makes connections that send a prefix and close, over plain TCP, TLS and PROXY."""

    def __init__(self, server, ca=None):
        self.server = server
        self.ca = ca

    def plain(self, data, port=None, source=None):
        send_and_close(corked_socket(port or self.server.port, source), data)

    def tls(self, head, prefix=b"", source=None):
        """A TLS handshake (after `prefix`, a PROXY header), then `head`, then close."""
        raw = corked_socket(self.server.tls_port, source)
        if prefix:
            raw.sendall(prefix)
        # TLS 1.2: its handshake ends with the server's last flight, which the client reads;
        # TLS 1.3 sends session tickets after it, and a client that closes with them unread
        # resets the connection instead of ending it.
        ctx = client_context(self.ca, maximum=ssl.TLSVersion.TLSv1_2)
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        send_and_close(s, head)


# What counts each abandoned connection once the server has taken it: the accepted total (a
# connection is counted when it is made: in queue, once a worker takes it from the queue, so
# "none open" alone could be seen while some still wait there), or, for one that never becomes
# a connection in every model (a handshake that queue's handshake stage drops), its failure.
ACCEPTED = "spoold_connections_accepted_total"
HANDSHAKES_CLOSED = 'spoold_tls_handshake_failures_total{reason="closed"}'
HEADER_ERRORS = "spoold_proxy_header_errors_total"


class AbandonedCase(SiteTestCase):
    def metrics(self, server, ca=None):
        if ca is not None and server.port == server.tls_port:  # --tls-only
            with tls_connect(server.tls_port, client_context(ca), host=HOST) as s:
                return parse_prometheus(get_over(s, "/metrics")[2].decode())
        return server.metrics()

    def open_connections(self, server, ca=None):
        """Connections open now, the one asking left out."""
        return int(self.metrics(server, ca)["spoold_connections_open"]) - 1

    def assert_released(self, server, make, what, counted_in, ca=None):
        """COUNT connections made by `make` are all taken (each counts once in `counted_in`)
        and released; none is left to the timeouts."""
        asked = 0  # the connections asking for /metrics, which count as accepted too

        def counted():
            nonlocal asked
            asked += 1
            m = self.metrics(server, ca)
            n = m[counted_in] - (asked if counted_in == ACCEPTED else 0)
            return n, int(m["spoold_connections_open"]) - 1
        before, _ = counted()
        for _ in range(COUNT):
            make()
        seen = {}

        def released():
            n, seen["open"] = counted()
            seen["taken"] = n - before
            return seen["taken"] >= COUNT and seen["open"] == 0
        try:
            wait_until(released, 60, f"{COUNT} abandoned connections ({what}) to be released")
        except AssertionError as e:
            raise AssertionError(f"{e}: {seen.get('taken')} taken, {seen.get('open')} still "
                                 "open") from None
        self.assertEqual(seen["taken"], COUNT, what)

    def certs(self):
        make_ca(self.tmp.path, "one")
        cert = os.path.join(self.tmp.path, "server.pem")
        key = os.path.join(self.tmp.path, "server.key")
        make_server_cert(self.tmp.path, "one", cert, key)
        return os.path.join(self.tmp.path, "one.ca.pem"), cert, key


class PlainTest(AbandonedCase):
    def test_partial_heads_then_close(self):
        with Spoold(self.site, self.store, NEVER, host=HOST) as server:
            a = Abandoner(server)
            self.assert_released(server, lambda: a.plain(PARTIAL_HEAD), "a partial head",
                                 ACCEPTED)
            self.assert_released(server, lambda: a.plain(b"GET /hel"), "half a request line",
                                 ACCEPTED)
            self.assertEqual(server.get("/hello.txt").body, HELLO)

    def test_whole_request_then_end(self):
        # A request and the client's end of stream together (it shuts its sending side and
        # reads): answered, then closed without waiting for the idle timeout.
        with Spoold(self.site, self.store, NEVER, host=HOST) as server:
            for _ in range(scaled(30, 10)):
                with Conn(server.port, host=HOST) as c:
                    c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
                    c.send(PARTIAL_HEAD + b"\r\n")
                    c.sock.shutdown(socket.SHUT_WR)
                    resp = c.read_final_response()
                    self.assertEqual((resp.status, resp.body), (200, HELLO))
                    self.assertEqual(c.read_to_eof(), b"")
            # The counter follows the close that the client saw (the socket closes first).
            wait_until(lambda: self.open_connections(server) == 0, 30,
                       "the answered connections to be counted as closed")


@unittest.skipIf(MODEL == "iterative", "iterative never refuses: the others wait in its backlog")
class BurstTest(AbandonedCase):
    LIMIT = 20

    def test_burst_over_max_connections_is_released(self):
        args = NEVER + ("--max-connections", str(self.LIMIT))
        if MODEL in ("prethreaded", "preforked"):
            # Refusals past --max-connections need more workers than it.
            args += ("--workers", str(4 * self.LIMIT))
        with Spoold(self.site, self.store, args, host=HOST) as server:
            burst = 3 * self.LIMIT
            socks = open_many(server.port, burst, 30, HOST)
            try:
                # The server is full: past LIMIT connections are answered 503.
                refused = self.wait_for_refusal(socks)
                self.assertTrue(refused.startswith(b"HTTP/1.1 503 "), refused)
                for s in socks:
                    s.setblocking(True)
                    try:
                        send_and_close(s, PARTIAL_HEAD)
                    except (BrokenPipeError, ConnectionResetError):
                        s.close()  # a refusal already lingered out
            finally:
                for s in socks:
                    s.close()

            # Every place comes back: a new client is served, and nothing stays open.
            def served():
                return server.get("/hello.txt").status == 200
            wait_until(served, 60, "a client to be served after the burst was abandoned")
            wait_until(lambda: self.open_connections(server) == 0, 60,
                       "the burst's connections to be released")

    def wait_for_refusal(self, socks):
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        end = time.monotonic() + 30 * SCALE
        try:
            while time.monotonic() < end:
                for key, _ in sel.select(1.0):
                    data = key.fileobj.recv(4096)
                    if data:
                        return data
                    sel.unregister(key.fileobj)
        finally:
            sel.close()
        raise AssertionError(f"none of {len(socks)} connections was refused past "
                             f"--max-connections {self.LIMIT}")


class ProxyHeaderTest(AbandonedCase):
    def test_partial_proxy_headers_and_heads_then_close(self):
        args = NEVER + ("--trust", f"{PROXY}/32", "--proxy-protocol")
        with Spoold(self.site, self.store, args, host=HOST) as server:
            a = Abandoner(server)
            self.assert_released(server, lambda: a.plain(PROXY_V1[:20], source=PROXY),
                                 "part of a v1 header", HEADER_ERRORS)
            self.assert_released(server, lambda: a.plain(PROXY_V2_PARTIAL, source=PROXY),
                                 "part of a v2 header", HEADER_ERRORS)
            self.assert_released(server, lambda: a.plain(PROXY_V1 + PARTIAL_HEAD, source=PROXY),
                                 "a header and a partial head", ACCEPTED)
            # Abandoned headers count as header errors; the whole ones did not.
            self.assertEqual(server.metrics()[HEADER_ERRORS], 2 * COUNT)


class TlsTest(AbandonedCase):
    def test_partial_handshakes_and_heads_then_close(self):
        ca, cert, key = self.certs()
        with Spoold(self.site, self.store, tls_args(cert, key, NEVER), host=HOST) as server:
            a = Abandoner(server, ca)
            self.assert_released(server, lambda: a.plain(PARTIAL_CLIENT_HELLO,
                                                         port=server.tls_port),
                                 "part of a ClientHello", HANDSHAKES_CLOSED, ca)
            self.assert_released(server, lambda: a.tls(PARTIAL_HEAD),
                                 "a handshake and a partial head", ACCEPTED, ca)


@unittest.skipUnless(TLS_AND_PROXY, "queue refuses --proxy-protocol with --tls-only")
class TlsBehindProxyTest(AbandonedCase):
    def test_header_then_partial_handshakes_and_heads_then_close(self):
        ca, cert, key = self.certs()
        extra = NEVER + ("--trust", f"{PROXY}/32", "--proxy-protocol")
        with Spoold(self.site, self.store, tls_args(cert, key, extra), host=HOST) as server:
            a = Abandoner(server, ca)
            self.assert_released(
                server, lambda: a.plain(PROXY_V1 + PARTIAL_CLIENT_HELLO, port=server.tls_port,
                                        source=PROXY),
                "a header and part of a ClientHello", HANDSHAKES_CLOSED, ca)
            self.assert_released(server, lambda: a.tls(PARTIAL_HEAD, PROXY_V1, source=PROXY),
                                 "a header, a handshake and a partial head", ACCEPTED, ca)


if __name__ == "__main__":
    main()
