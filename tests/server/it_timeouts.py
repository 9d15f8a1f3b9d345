"""spoold's timeouts: a slow request head gets 408, an idle keep-alive connection is closed, and
clients that read nothing neither hold up others nor stay open past --write-timeout."""

import os
import socket
import time

from spoold_harness import (HELLO, SCALE, Conn, ServerTestCase, build_request, main,
                            wait_until)

SLOW_FILE_SIZE = 64 * 1024 * 1024  # far more than loopback socket buffers can hold


class TimeoutTest(ServerTestCase):
    server_args = ("--header-timeout", "1", "--idle-timeout", "1", "--write-timeout", "2")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # A sparse file: big enough that the kernel cannot buffer the whole response.
        with open(os.path.join(cls.site, "huge.bin"), "wb") as f:
            f.truncate(SLOW_FILE_SIZE)

    def open_connections(self):
        return int(self.server.metrics()["spoold_connections_open"])

    def accepted_connections(self):
        # Counts the /metrics request's own connection too; callers compare differences.
        return int(self.server.metrics()["spoold_connections_accepted_total"])

    def test_408_on_slow_head(self):
        for partial in (b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n",  # head never ends
                        b"GET /hel",                                 # request line never ends
                        b"POST /guestbook HTTP/1.1\r\n"):
            with self.subTest(partial=partial), Conn(self.server.port) as c:
                c.send(partial)
                resp = c.read_final_response()
                self.assertEqual(resp.status, 408, resp)
                self.assertEqual(c.read_to_eof(), b"")
        self.assert_still_serving()

    def test_408_head_dribbled_byte_by_byte_is_still_timed_out(self):
        # The header timeout runs from the first byte: trickling bytes does not extend it.
        with Conn(self.server.port) as c:
            c.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Trickle: ")
            got = None
            for _ in range(200 * SCALE):
                if not c.send(b"v"):
                    break
                # Waiting for an answer between bytes paces the trickle (~20 bytes a second).
                c.sock.settimeout(0.05)
                try:
                    data = c.sock.recv(4096)
                except (socket.timeout, BlockingIOError):
                    continue
                except ConnectionResetError:
                    data = b""
                got = data
                break
            self.assertIsNotNone(got, "the server kept waiting for a head trickled for 10 s")
            self.assertTrue(got == b"" or got.startswith(b"HTTP/1.1 408"), got)

    def test_idle_keep_alive_closed(self):
        with Conn(self.server.port) as c:
            c.send(build_request("GET", "/hello.txt"))
            resp = c.read_final_response()
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, HELLO)
            # Nothing more is sent: the server closes after --idle-timeout (EOF, no bytes).
            self.assertEqual(c.read_to_eof(), b"")

    def test_connection_that_sends_nothing_is_closed(self):
        with Conn(self.server.port) as c:
            data = c.read_to_eof()
            # Either closed silently or with a 408; never left open.
            self.assertTrue(data == b"" or data.startswith(b"HTTP/1.1 408"), data)

    def test_slow_readers_do_not_block_others_and_are_closed(self):
        # The iterative model (ONE_AT_A_TIME) cannot keep this test's first promise: each slow
        # reader holds the server until --write-timeout closes it, and the other client below
        # is served only after the last of them. What it must still do is close every one of
        # them after --write-timeout and then serve the rest, which is what is checked.
        baseline = self.open_connections()
        accepted_before = self.accepted_connections()
        readers = []
        try:
            # More slow readers than event loops: if one blocked its loop, others would starve.
            for _ in range(8):
                c = Conn(self.server.port, rcvbuf=4096)
                c.send(build_request("GET", "/huge.bin"))
                readers.append(c)
            # The accepted counter, not the open gauge: on a loaded machine the first readers
            # may already have hit --write-timeout before the last one is accepted.
            wait_until(lambda: self.accepted_connections() >= accepted_before + len(readers),
                       30, "the slow readers to be accepted")
            # Other clients are served meanwhile, on new and on kept-alive connections.
            with Conn(self.server.port) as other:
                for i in range(20):
                    other.send(build_request("GET", f"/p{i}.txt"))
                    resp = other.read_final_response()
                    self.assertEqual(resp.status, 200)
                    self.assertEqual(resp.body, f"file {i}\n".encode())
            for _ in range(10):
                self.assertEqual(self.server.get("/guestbook").status, 200)
            # After --write-timeout the server gives up on them.
            wait_until(lambda: self.open_connections() <= baseline, 60,
                       "the slow readers to be closed after --write-timeout")
            for c in readers:
                c.settimeout(30)
                received = len(c.buf)
                try:
                    while True:
                        chunk = c.sock.recv(1 << 20)
                        if not chunk:
                            break
                        received += len(chunk)
                except ConnectionResetError:
                    pass
                self.assertLess(received, SLOW_FILE_SIZE,
                                "a reader that read nothing received the whole file")
        finally:
            for c in readers:
                c.close()
        self.assert_still_serving()


class LongIdleTimeoutTest(ServerTestCase):
    """With a long idle timeout a kept-alive connection stays usable between requests."""

    server_args = ("--idle-timeout", "600", "--header-timeout", "600")

    def test_connection_survives_between_requests(self):
        with Conn(self.server.port) as c:
            for i in range(3):
                c.send(build_request("GET", f"/p{i}.txt"))
                self.assertEqual(c.read_final_response().body, f"file {i}\n".encode())
            # A partial head followed by the rest later is one request (no 408 with a long
            # header timeout).
            c.send(b"GET /p7.txt HTTP/1.1\r\n")
            c.send(b"Host: x\r\n\r\n")
            self.assertEqual(c.read_final_response().body, b"file 7\n")

    def test_waiting_for_the_rest_of_a_request_costs_no_cpu(self):
        # A half-sent request must leave the server asleep (in epoll_wait, poll or a blocking
        # wait), not polling the connection, which would burn a whole core until the header
        # timeout.
        def cpu_seconds():
            # The whole process tree: in the forking models a child serves the connection.
            total = 0
            pending = [self.server.proc.pid]
            while pending:
                pid = pending.pop()
                try:
                    with open(f"/proc/{pid}/stat") as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    total += int(fields[11]) + int(fields[12])
                    for tid in os.listdir(f"/proc/{pid}/task"):
                        with open(f"/proc/{pid}/task/{tid}/children") as f:
                            pending.extend(int(c) for c in f.read().split())
                except FileNotFoundError:
                    pass  # a process that ended meanwhile
            return total / os.sysconf("SC_CLK_TCK")

        with Conn(self.server.port) as c:
            # One whole request first: its answer shows the connection is being served (in
            # every model, the iterative one included, without a second connection).
            c.send(build_request("GET", "/p2.txt"))
            self.assertEqual(c.read_final_response().body, b"file 2\n")
            c.send(b"GET /p3.txt HTTP/1.1\r\nHost: x\r\n")
            before = cpu_seconds()
            window = 1.0
            time.sleep(window)  # the observation window, not a synchronisation
            used = cpu_seconds() - before
            self.assertLess(used, 0.25 * window,
                            f"spoold used {used:.2f} s of CPU in {window} s while a request was "
                            "half-sent")
            c.send(b"\r\n")
            self.assertEqual(c.read_final_response().body, b"file 3\n")

    def test_request_split_across_many_sends(self):
        req = build_request("GET", "/p9.txt")
        with Conn(self.server.port) as c:
            c.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for b in req:
                c.send(bytes([b]))
            self.assertEqual(c.read_final_response().body, b"file 9\n")


if __name__ == "__main__":
    main()
