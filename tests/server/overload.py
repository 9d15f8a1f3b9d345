"""Overload of the event-loop models (epoll, the default, and poll): out of descriptors,
accepting pauses and is reported on stderr a bounded number of times, counted in /metrics, and
service resumes once descriptors are free. (Memory after a wave of connections:
memory_after_wave.py.) Release builds only: a sanitizer's runtime needs descriptors of its own
(tests/server/CMakeLists.txt says which and why)."""

import math
import resource
import time

from it_load import open_many
from spoold_harness import HELLO, SCALE, SiteTestCase, Spoold, main, wait_until

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


if __name__ == "__main__":
    main()
