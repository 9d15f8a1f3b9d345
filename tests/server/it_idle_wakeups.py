"""An idle spoold makes no wake-ups (release builds only: tests/server/CMakeLists.txt says why).
After serving requests (with the access log on, so that its flush is scheduled too) and seeing
the connections close, every thread of the server (and of its children, for the models that
fork) sleeps until an event: no event loop, log flusher or memory trimmer wakes on a period.
Before, the event loops swept their connections every 100 ms and the flusher and trimmer ticked
on their own periods.

The check: the context switches of every thread, read from /proc, are counted over a window of one
second; an idle server must reach a window with none. The work it does right after the requests
(the access log written 100 ms after its first line, the trim a second after the last connection,
pool threads retiring after the pool's keep-alive) may take some windows first, so windows are
looked at until one is quiet, within a bound. The access log's lines must be in the file by then:
the flush is scheduled by the line, not by a tick. The same over TLS: the classic models hand
each TLS connection to a handshake thread first, which must sleep too."""

import http.client
import os
import ssl
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spoold_harness import HELLO, MODEL, SCALE, SiteTestCase, Spoold, main  # noqa: E402
from it_tls import make_ca, make_server_cert, tls_args  # noqa: E402

WINDOW = 1.0
# Longer than the pool's keep-alive (10 s) plus a trim interval and a flush, so
# that every scheduled chore is done within it.
QUIET_WITHIN = 20 * SCALE
REQUESTS = 5


def processes(root_pid):
    """root_pid and its descendants (forking, preforked)."""
    found = [root_pid]
    i = 0
    while i < len(found):
        pid = found[i]
        i += 1
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def switches(root_pid):
    """{(pid, tid, name): voluntary + involuntary context switches} of every thread."""
    out = {}
    for pid in processes(root_pid):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/comm") as f:
                    name = f.read().strip()
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    status = f.read()
            except OSError:
                continue
            count = 0
            for line in status.splitlines():
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    count += int(line.split()[1])
            out[(pid, int(tid), name)] = count
    return out


class IdleWakeups(SiteTestCase):
    def test_an_idle_server_sleeps_until_an_event(self):
        log = os.path.join(self.tmp.path, "access.log")
        with Spoold(self.site, self.store, ["--access-log", log]) as s:
            for _ in range(REQUESTS):
                resp = s.get("/hello.txt")
                self.assertEqual(resp.status, 200)
                self.assertEqual(resp.body, HELLO)
            self.assert_quiet_window(s, log)

    def test_an_idle_tls_server_sleeps_until_an_event(self):
        make_ca(self.tmp.path, "idle")
        cert = os.path.join(self.tmp.path, "server.pem")
        key = os.path.join(self.tmp.path, "server.key")
        make_server_cert(self.tmp.path, "idle", cert, key)
        ca = ssl.create_default_context(cafile=os.path.join(self.tmp.path, "idle.ca.pem"))
        log = os.path.join(self.tmp.path, "access.log")
        with Spoold(self.site, self.store, list(tls_args(cert, key, ("--access-log", log)))) as s:
            for _ in range(REQUESTS):  # a connection, and so a handshake, per request
                conn = http.client.HTTPSConnection("127.0.0.1", s.tls_port, timeout=10 * SCALE,
                                                   context=ca)
                conn.request("GET", "/hello.txt")
                resp = conn.getresponse()
                self.assertEqual((resp.status, resp.read()), (200, HELLO))
                conn.close()
            self.assert_quiet_window(s, log)

    def assert_quiet_window(self, s, log):
        """Waits for a window in which no thread of server s switched, within QUIET_WITHIN;
        then the access log must hold the REQUESTS lines."""
        busy = []
        end = time.monotonic() + QUIET_WITHIN
        quiet = False
        while time.monotonic() < end:
            before = switches(s.proc.pid)
            time.sleep(WINDOW)  # the window measured, not a wait for an event
            after = switches(s.proc.pid)
            woke = {k: after[k] - before[k] for k in after if k in before and
                    after[k] != before[k]}
            if not woke:
                quiet = True
                break
            busy.append(woke)
        self.assertTrue(quiet, f"{MODEL}: no quiet window of {WINDOW} s within "
                               f"{QUIET_WITHIN} s; threads that woke, per window: {busy}")
        with open(log) as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), REQUESTS, lines)
        self.assertTrue(all('"GET /hello.txt HTTP/1.1" 200' in line for line in lines), lines)


if __name__ == "__main__":
    main()
