"""Overload of the event-loop models (epoll, the default, and poll): out of descriptors,
accepting pauses and is reported on stderr a bounded number of times, counted in /metrics, and
service resumes once descriptors are free; after a wave of connections closes, the memory it
took is given back."""

import math
import resource
import time

from it_load import open_many
from spoold_harness import (HELLO, SCALE, SiteTestCase, Spoold, main, scaled, wait_until)

PARTIAL = b"GET /hello.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def exhaustion_lines(server):
    return [l for l in server.err.text().splitlines() if "accept4" in l]


class OutOfDescriptorsTest(SiteTestCase):
    FD_LIMIT = 64
    CLIENTS = 150

    def limit_fds(self):
        resource.setrlimit(resource.RLIMIT_NOFILE, (self.FD_LIMIT, self.FD_LIMIT))

    def test_exhaustion_pauses_reports_and_recovers(self):
        with Spoold(self.site, self.store, ("--idle-timeout", "600", "--header-timeout", "600"),
                    preexec_fn=self.limit_fds) as server:
            self.assertEqual(server.get("/hello.txt").body, HELLO)
            clients = open_many(server.port, self.CLIENTS, 60)
            try:
                # The server takes connections until its descriptors run out, then retries
                # every 100 ms in each loop; it stays out of them until the clients close, for
                # as long as it takes to report three times.
                started = time.monotonic()
                reports = []

                def third_report(line):
                    if "accept4" in line:
                        reports.append(line)
                    return len(reports) == 3

                self.assertIsNotNone(server.err.wait_for(third_report, 30 * SCALE),
                                     f"no third accept4 report:\n{server.err.text()}")
                self.assertIn("Too many open files", reports[0])
            finally:
                for s in clients:
                    s.close()
            wait_until(lambda: server.get("/hello.txt").body == HELLO, 30,
                       "a request to be served once the clients closed")
            elapsed = time.monotonic() - started
            lines = exhaustion_lines(server)
            # One line a second at most, and the first at once.
            self.assertLessEqual(len(lines), 2 + math.ceil(elapsed), "\n".join(lines))
            failed = server.metrics()["spoold_accepts_exhausted_total"]
            self.assertGreater(failed, len(lines))


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


if __name__ == "__main__":
    main()
