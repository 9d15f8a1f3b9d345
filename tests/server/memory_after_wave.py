"""After a wave of connections closes, the server gives the memory the wave took back to the
system: RSS returns within 2x of the idle figure (models/memory_trim.hpp). Registered for the
event-loop models (epoll, the default, and poll) and for threaded, whose connection threads
free into arenas of their own, with both waves; for prethreaded with the plain wave and for
queue with the wave of abandoned TLS handshakes (tests/server/CMakeLists.txt says why each
leaves the other out). Release builds only (tests/server/CMakeLists.txt): the figure is
glibc malloc's, and a sanitizer replaces malloc with an allocator of its own that malloc_trim
does not reach, and adds shadow memory of its own.

SPOOLD_MEASURE_AFTER_S=S (for bench/load/BENCHMARKS.md) also prints RSS S seconds after the wave's end,
once the test's condition holds: the test itself stops at the first figure within 2x, which
may come before the first trim."""

import os
import selectors
import ssl
import sys
import time

from it_load import open_many
from it_tls import client_context, get_over, make_ca, make_server_cert, tls_args, tls_connect
from spoold_harness import (HELLO, MODEL, SCALE, SiteTestCase, Spoold, main, parse_prometheus,
                            scaled, wait_until)

PARTIAL = b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"
TRIM_INTERVAL_S = 1.0  # memory_trim::interval
MEASURE_AFTER_S = float(os.environ.get("SPOOLD_MEASURE_AFTER_S") or 0)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def measured_after(pid, closed_at):
    """With SPOOLD_MEASURE_AFTER_S: ", R KiB at S s" (RSS that long after the wave), else ""."""
    if not MEASURE_AFTER_S:
        return ""
    time.sleep(max(0.0, closed_at + MEASURE_AFTER_S - time.monotonic()))  # a hold, to measure
    return f", {rss_kib(pid)} KiB at {MEASURE_AFTER_S:g} s"


class MemoryAfterWaveTest(SiteTestCase):
    CONNECTIONS = scaled(3000, 300)

    def test_memory_given_back_after_a_wave(self):
        with Spoold(self.site, self.store, ("--idle-timeout", "600", "--header-timeout", "600")
                    ) as server:
            for _ in range(20):
                self.assertEqual(server.get("/hello.txt").body, HELLO)
            pid = server.proc.pid
            idle = rss_kib(pid)
            socks = open_many(server.port, self.CONNECTIONS, 60)
            try:
                for s in socks:
                    s.send(PARTIAL)
                wait_until(lambda: server.metrics()["spoold_connections_open"]
                           >= self.CONNECTIONS, 30, "every connection of the wave to be open")
                peak = rss_kib(pid)
            finally:
                for s in socks:
                    s.close()
            closed_at = time.monotonic()
            figures = {}

            def settled():
                # The connection asking for /metrics is the one open.
                figures["open"] = server.metrics()["spoold_connections_open"] - 1
                figures["rss"] = rss_kib(pid)
                return figures["open"] == 0 and figures["rss"] <= 2 * idle

            try:
                wait_until(settled, 20, "the wave's memory to be given back")
            except AssertionError as e:
                raise AssertionError(f"{e}: idle {idle} KiB, peak {peak} KiB, now "
                                     f"{figures.get('rss')} KiB with {figures.get('open')} "
                                     "connections open") from None
            # The figures, for bench/load/BENCHMARKS.md ("Memory after a wave").
            print(f"memory_after_wave: model {MODEL}: idle {idle} KiB, peak {peak} KiB, "
                  f"{figures['rss']} KiB {time.monotonic() - closed_at:.1f} s after the wave"
                  f"{measured_after(pid, closed_at)}", file=sys.stderr)


def client_hello():
    """The first flight of a TLS client (a whole ClientHello), from a client that goes no
    further: every connection may send the same bytes, each server handshake answers them."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["http/1.1"])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ctx.wrap_bio(incoming, outgoing, server_side=False)
    try:
        client.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


class MemoryAfterAbandonedHandshakesTest(SiteTestCase):
    """A wave of TLS handshakes abandoned halfway (the client sends its ClientHello, reads the
    server's answer, and closes): the memory they took goes back as after any other wave. In
    queue the handshakes never reach the pool: they end in its handshake stage, whose drops
    count for the trimmer as ended connections do."""
    CONNECTIONS = 1000

    def test_memory_given_back_after_abandoned_handshakes(self):
        make_ca(self.tmp.path, "one")
        cert = os.path.join(self.tmp.path, "server.pem")
        key = os.path.join(self.tmp.path, "server.key")
        make_server_cert(self.tmp.path, "one", cert, key)
        ca = os.path.join(self.tmp.path, "one.ca.pem")
        # A pool of fixed size: a pool thread that retires is a reason to trim of its own,
        # which would hide whether the end of the handshakes is one. One event loop (epoll):
        # the handshakes then take their memory from one malloc arena, not one per loop.
        args = tls_args(cert, key, ("--idle-timeout", "600", "--header-timeout", "600",
                                    "--threads", "2:2", "--loops", "1"))
        with Spoold(self.site, self.store, args) as server:
            def metrics():
                if server.port != server.tls_port:
                    return server.metrics()
                with tls_connect(server.tls_port, client_context(ca)) as s:
                    return parse_prometheus(get_over(s, "/metrics")[2].decode())

            def closed_handshakes():
                return metrics()['spoold_tls_handshake_failures_total{reason="closed"}']

            for _ in range(20):
                with tls_connect(server.tls_port, client_context(ca)) as s:
                    self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
            idle = rss_kib(server.proc.pid)
            before = closed_handshakes()
            hello = client_hello()
            socks = open_many(server.tls_port, self.CONNECTIONS, 60)
            try:
                for s in socks:
                    s.setblocking(True)
                    s.sendall(hello)
                # Every server has answered its ClientHello: each handshake is under way.
                sel = selectors.DefaultSelector()
                for s in socks:
                    sel.register(s, selectors.EVENT_READ)
                waiting = len(socks)
                end = time.monotonic() + 60 * SCALE
                while waiting and time.monotonic() < end:
                    for key_, _ in sel.select(1.0):
                        sel.unregister(key_.fileobj)
                        waiting -= 1
                sel.close()
                self.assertEqual(waiting, 0, "handshakes the server never answered")
                # Held open past a turn of the trimmer (once a second): a reason to trim left
                # from before the wave (the warm-up's connections) is used up while the wave is
                # still open, so a trim after it can only come from the wave's end.
                time.sleep(TRIM_INTERVAL_S + 0.5)  # a hold, not a synchronisation
                peak = rss_kib(server.proc.pid)
            finally:
                for s in socks:
                    s.close()
            closed_at = time.monotonic()
            # Watched from outside alone: a request served now would end a connection, which
            # is a reason to trim of its own (one request after the wave used to be the only
            # thing that gave queue's memory back).
            figures = {}

            def settled():
                figures["rss"] = rss_kib(server.proc.pid)
                return figures["rss"] <= 2 * idle
            try:
                wait_until(settled, 20, "the abandoned handshakes' memory to be given back")
            except AssertionError as e:
                raise AssertionError(f"{e}: idle {idle} KiB, peak {peak} KiB, now "
                                     f"{figures.get('rss')} KiB") from None
            rss = f"{figures['rss']} KiB {time.monotonic() - closed_at:.1f} s after the wave"
            rss += measured_after(server.proc.pid, closed_at)
            # Every handshake of the wave ended as closed by its client; nothing is left open
            # but the connection asking.
            wait_until(lambda: closed_handshakes() == before + self.CONNECTIONS, 30,
                       "every abandoned handshake to be counted as closed")
            wait_until(lambda: metrics()["spoold_connections_open"] == 1, 30,
                       "no connection but this one to be open")
            print(f"memory_after_wave: model {MODEL}, abandoned handshakes: idle {idle} KiB, "
                  f"peak {peak} KiB, {rss}", file=sys.stderr)


if __name__ == "__main__":
    main()
