"""Refusals past --max-connections: every refused client reads the whole 503 and then an
end-of-file, never a reset, while the admitted connections go on being served. Runs against
every model that refuses (all but iterative, which serves one connection at a time and never
accepts a second)."""

import concurrent.futures
import socket

from spoold_harness import HELLO, SCALE, Conn, ServerTestCase, build_request, main

REFUSED = (b"HTTP/1.1 503 Service Unavailable\r\n"
           b"Content-Type: text/plain; charset=utf-8\r\n"
           b"Content-Length: 33\r\nConnection: close\r\nRetry-After: 1\r\n\r\n"
           b"Too many connections; try again.\n")


def refused_client(port):
    """Connects, sends a whole request and reads to the end; returns what it read, or the error
    that ended it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30 * SCALE) as s:
        try:
            s.sendall(build_request("GET", "/hello.txt"))
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    return data
                data += chunk
        except OSError as e:
            return e


class RefusalTest(ServerTestCase):
    LIMIT = 2
    CLIENTS = 200
    server_args = ("--max-connections", str(LIMIT), "--idle-timeout", "600",
                   "--header-timeout", "600")

    def test_refused_clients_read_503_then_eof(self):
        held = []
        try:
            for _ in range(self.LIMIT):
                held.append(Conn(self.server.port))
            # Answered, so each is surely admitted and holds its place.
            for c in held:
                c.send(build_request("GET", "/hello.txt"))
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, HELLO))
            with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
                outcomes = list(pool.map(refused_client, [self.server.port] * self.CLIENTS))
            bad = [o for o in outcomes if o != REFUSED]
            self.assertEqual(bad[:5], [], f"{len(bad)} of {self.CLIENTS} refused clients did "
                                          "not read the whole 503 and then end-of-file")
            # The admitted connections are still served.
            for c in held:
                c.send(build_request("GET", "/hello.txt"))
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, HELLO))
        finally:
            for c in held:
                c.close()
        # Places come back once the held connections close; every refusal was counted.
        metrics = self.server.metrics_once_admitted()
        self.assertGreaterEqual(metrics["spoold_connections_refused_total"], self.CLIENTS)


if __name__ == "__main__":
    main()
