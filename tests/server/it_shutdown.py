"""Graceful shutdown: requests in flight at SIGTERM/SIGINT are answered in full, idle
connections are closed, new connections are refused, the access log is complete, and spoold
exits 0 with its cpu line."""

import os
import re
import signal
import socket
import threading
import unittest

from spoold_harness import (BIG_SIZE, HELLO, ONE_AT_A_TIME, Conn, Spoold, TempDir, build_request, form_body,
                            main, make_site, raise_nofile_limit, scaled, site_file, sqlite_store,
                            wait_until)

CLF = re.compile(r'^(\S+) (\S+) (\S+) \[([^\]]+)\] "([^"]*)" (\d{3}) (\d+|-)$')
SLOW_FILE_SIZE = 64 * 1024 * 1024


class ShutdownTest(unittest.TestCase):
    def setUp(self):
        raise_nofile_limit()
        self.tmp = TempDir()
        self.site = make_site(self.tmp.path)
        self.log_path = os.path.join(self.tmp.path, "access.log")
        # Cleanups run last-in first-out: servers a failed test left running are killed
        # before their directory goes.
        self.addCleanup(self.tmp.close)

    def start(self, *args):
        server = Spoold(self.site, sqlite_store(self.tmp.path), args).start()
        self.addCleanup(self.kill_if_running, server)
        return server

    @staticmethod
    def kill_if_running(server):
        # A test that passed has stopped its server and checked the exit; this is for one that
        # failed half-way, which must not leave spoold behind.
        if server.alive():
            server.kill()

    def open_connections(self, server):
        return int(server.metrics()["spoold_connections_open"])

    def access_log_lines(self):
        with open(self.log_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for line in lines:
            self.assertRegex(line, CLF)
        return lines

    def assert_never_answered(self, conn):
        # A connection still in the listen backlog when the listener closes: the kernel resets
        # it (or the peer sees end-of-file); it never gets a response.
        try:
            data = conn.read_to_eof()
        except ConnectionResetError:
            data = b""
        self.assertEqual(data, b"")

    def test_in_flight_requests_complete_on_sigterm(self):
        if ONE_AT_A_TIME:
            self.one_at_a_time_in_flight_request_completes()
            return
        n = scaled(50, 20)
        server = self.start("--access-log", self.log_path, "--grace", "60")
        big = site_file(self.site, "big.bin")
        conns = [Conn(server.port) for _ in range(n)]
        # Every connection is accepted before the requests go out, so that each one is
        # "in flight" from the server's point of view once its bytes arrive.
        wait_until(lambda: self.open_connections(server) >= n + 1, 30,
                   f"{n} connections to be accepted")
        barrier = threading.Barrier(n + 1)
        sent = threading.Semaphore(0)
        results = [None] * n

        def client(i):
            c = conns[i]
            if i % 2 == 0:
                req = build_request("POST", "/guestbook",
                                    {"Content-Type": "application/x-www-form-urlencoded"},
                                    form_body({"guest-name": f"inflight{i}",
                                               "guest-remarks": f"sent before SIGTERM {i}"}))
            else:
                req = build_request("GET", "/big.bin")
            barrier.wait()
            ok = c.send(req)
            sent.release()
            try:
                results[i] = (ok, c.read_final_response())
            except Exception as e:  # recorded and asserted on below
                results[i] = (ok, e)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        barrier.wait()
        for _ in range(n):
            sent.acquire()
        server.send_signal(signal.SIGTERM)
        for t in threads:
            t.join()
        for c in conns:
            c.close()
        server.wait(60)
        server.check_clean_exit()

        for i, (ok, resp) in enumerate(results):
            with self.subTest(client=i):
                self.assertTrue(ok, "the request could not be sent")
                self.assertNotIsInstance(resp, Exception, f"request {i} lost: {resp!r}")
                if i % 2 == 0:
                    self.assertEqual(resp.status, 303, resp)
                else:
                    self.assertEqual(resp.status, 200, resp)
                    self.assertEqual(len(resp.body), BIG_SIZE)
                    self.assertTrue(resp.body == big, "large file corrupted")
        lines = self.access_log_lines()
        posts = [l for l in lines if '"POST /guestbook HTTP/1.1" 303' in l]
        gets = [l for l in lines if f'"GET /big.bin HTTP/1.1" 200 {BIG_SIZE}' in l]
        self.assertEqual(len(posts), (n + 1) // 2, lines)
        self.assertEqual(len(gets), n // 2, lines)

        # Every acknowledged post is in the store.
        server = self.start()
        page = server.get("/guestbook").body.decode()
        server.stop()
        for i in range(0, n, 2):
            self.assertIn(f"sent before SIGTERM {i}<", page)

    def one_at_a_time_in_flight_request_completes(self):
        # The iterative model has one request in flight at most: that one is answered in full;
        # a client still waiting in the backlog is never accepted (server/models/README.md).
        server = self.start("--access-log", self.log_path, "--grace", "60")
        big = site_file(self.site, "big.bin")
        served = Conn(server.port, rcvbuf=4096)
        served.send(build_request("GET", "/big.bin"))
        self.assertEqual(served.read_head()[1], 200)  # accepted, the body under way
        waiting = Conn(server.port)
        waiting.send(build_request("GET", "/hello.txt"))
        server.send_signal(signal.SIGTERM)
        served.settimeout(120)
        body = served.read_to_eof()
        self.assertTrue(body == big, f"the in-flight response was cut: {len(body)} bytes")
        self.assert_never_answered(waiting)
        served.close()
        waiting.close()
        server.wait(60)
        server.check_clean_exit()
        self.assertEqual(len(self.access_log_lines()), 1)

    def test_new_connections_refused_while_draining(self):
        server = self.start("--grace", "120")
        # A client that reads nothing keeps one response in flight, so the server is still
        # draining when we try to connect again.
        slow = Conn(server.port, rcvbuf=4096)
        with open(os.path.join(self.site, "huge.bin"), "wb") as f:
            f.truncate(SLOW_FILE_SIZE)
        slow.send(build_request("GET", "/huge.bin"))
        head = slow.read_head()
        self.assertEqual(head[1], 200)
        server.send_signal(signal.SIGTERM)

        def refused():
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", server.port))
            except ConnectionRefusedError:
                return True
            finally:
                s.close()
            return False

        wait_until(refused, 30, "new connections to be refused after SIGTERM")
        self.assertTrue(server.alive(), "spoold exited with a response in flight")
        # The in-flight response is completed in full.
        slow.settimeout(120)
        received = len(slow.buf)
        while True:
            chunk = slow.sock.recv(1 << 20)
            if not chunk:
                break
            received += len(chunk)
        slow.close()
        self.assertEqual(received, SLOW_FILE_SIZE)
        server.wait(60)
        server.check_clean_exit()

    def test_idle_connections_closed_on_sigterm(self):
        # Long timeouts and grace: spoold may only exit promptly by closing idle connections.
        server = self.start("--idle-timeout", "600", "--grace", "600")
        if ONE_AT_A_TIME:
            # One idle connection holds the iterative server; the next waits in the backlog.
            with Conn(server.port) as idle, Conn(server.port) as waiting:
                idle.send(build_request("GET", "/hello.txt"))
                self.assertEqual(idle.read_final_response().body, HELLO)
                waiting.send(build_request("GET", "/hello.txt"))
                server.send_signal(signal.SIGTERM)
                self.assertEqual(idle.read_to_eof(), b"")
                self.assert_never_answered(waiting)
            server.wait(60)
            server.check_clean_exit()
            return
        idle = []
        for _ in range(5):
            c = Conn(server.port)
            c.send(build_request("GET", "/hello.txt"))
            self.assertEqual(c.read_final_response().body, HELLO)
            idle.append(c)
        never_sent = Conn(server.port)  # connected, nothing sent yet
        wait_until(lambda: self.open_connections(server) >= 7, 30, "connections accepted")
        server.send_signal(signal.SIGTERM)
        for c in idle + [never_sent]:
            self.assertEqual(c.read_to_eof(), b"")
            c.close()
        server.wait(60)
        server.check_clean_exit()

    def test_sigint_is_graceful(self):
        server = self.start("--access-log", self.log_path)
        with Conn(server.port) as c:
            c.send(build_request("GET", "/hello.txt"))
            self.assertEqual(c.read_final_response().body, HELLO)
            server.send_signal(signal.SIGINT)
            self.assertEqual(c.read_to_eof(), b"")
        server.wait(60)
        server.check_clean_exit()
        self.assertEqual(len(self.access_log_lines()), 1)

    def test_access_log_one_line_per_request(self):
        server = self.start("--access-log", self.log_path)
        expected = []
        with Conn(server.port) as c:
            for path, status, length in (("/hello.txt", 200, len(HELLO)), ("/nope", 404, None),
                                         ("/p1.txt", 200, 7), ("/sub", 301, None)):
                c.send(build_request("GET", path))
                resp = c.read_final_response()
                self.assertEqual(resp.status, status)
                expected.append((f"GET {path} HTTP/1.1", status, length))
            c.send(build_request("HEAD", "/hello.txt"))
            self.assertEqual(c.read_final_response("HEAD").status, 200)
            expected.append(("HEAD /hello.txt HTTP/1.1", 200, None))
            c.send(build_request("GET", "/big.bin", {"Range": "bytes=0-99"}))
            self.assertEqual(c.read_final_response().status, 206)
            expected.append(("GET /big.bin HTTP/1.1", 206, 100))
        resp = server.post_form("/guestbook", {"guest-name": "log", "guest-remarks": "line"})
        self.assertEqual(resp.status, 303)
        expected.append(("POST /guestbook HTTP/1.1", 303, None))
        resp = server.get("/x", method="FOO")
        self.assertEqual(resp.status, 501)
        server.stop()

        lines = self.access_log_lines()
        self.assertEqual(len(lines), len(expected) + 1, lines)  # + the FOO request
        parsed = [CLF.match(l).groups() for l in lines]
        for (request_line, status, length) in expected:
            with self.subTest(request=request_line, status=status):
                match = [p for p in parsed if p[4] == request_line and int(p[5]) == status]
                self.assertEqual(len(match), 1, lines)
                host = match[0][0]
                self.assertEqual(host, "127.0.0.1")
                if length is not None:
                    self.assertEqual(match[0][6], str(length))
        self.assertTrue(any(p[5] == "501" for p in parsed), lines)


if __name__ == "__main__":
    main()
