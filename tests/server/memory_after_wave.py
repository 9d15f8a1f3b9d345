"""After a wave of connections closes, the server gives the memory the wave took back to the
system: RSS returns within 2x of the idle figure (models/memory_trim.hpp). Registered for the
event-loop models (epoll, the default, and poll) and for threaded and prethreaded, whose
connection threads free into arenas of their own (tests/server/CMakeLists.txt says why not
queue). Release builds only (tests/server/CMakeLists.txt): the figure is
glibc malloc's, and a sanitizer replaces malloc with an allocator of its own that malloc_trim
does not reach, and adds shadow memory of its own."""

import sys
import time

from it_load import open_many
from spoold_harness import HELLO, MODEL, SiteTestCase, Spoold, main, scaled, wait_until

PARTIAL = b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


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
            # The figures, for BENCHMARKS.md ("Memory after a wave").
            print(f"memory_after_wave: model {MODEL}: idle {idle} KiB, peak {peak} KiB, "
                  f"{figures['rss']} KiB {time.monotonic() - closed_at:.1f} s after the wave",
                  file=sys.stderr)


if __name__ == "__main__":
    main()
