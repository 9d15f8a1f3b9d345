"""spoold on IPv6: --bind ::1 serves IPv6 clients and says http://[::1]:PORT/, --bind :: is
dual-stack (an IPv4 client is served too and logged as its plain IPv4 address), the bracketed
form of URLs is taken, and a bad address is a usage error (exit 2). Needs the IPv6 loopback
address: without it every test fails, saying so."""

import os
import socket

from spoold_harness import (LISTEN_RE, SCALE, Conn, SiteTestCase, Spoold, build_request, main,
                            run_spoold)


def ipv6_loopback_error():
    """Why ::1 cannot be bound on this machine, or None when it can."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError as e:
        return f"this machine has no IPv6 loopback address (::1): {e}"
    return None


def get_over(family, host, port, path):
    """GET path from a client of `family` connecting to host:port; the final response."""
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.settimeout(30 * SCALE)
    try:
        sock.connect((host, port))
    except OSError:
        sock.close()
        raise
    url_host = f"[{host}]" if family == socket.AF_INET6 else host
    with Conn(port, sock=sock) as c:
        c.send(build_request("GET", path, {"Host": f"{url_host}:{port}", "Connection": "close"}))
        return c.read_final_response()


class IPv6Test(SiteTestCase):
    def setUp(self):
        super().setUp()
        missing = ipv6_loopback_error()
        if missing:
            self.fail(missing)
        self.log_path = os.path.join(self.tmp.path, "access.log")

    def start(self, bind):
        # The harness passes --bind 127.0.0.1; the later --bind wins.
        server = Spoold(self.site, self.store, ["--bind", bind, "--access-log", self.log_path])
        server.start()
        self.addCleanup(lambda: server.kill() if server.alive() else None)
        return server

    def listening_host(self, server):
        line = next(l for l in server.out.lines if LISTEN_RE.search(l))
        self.assertIn(f":{server.port}/", line)
        return LISTEN_RE.search(line).group(1)

    def assert_serves(self, family, host, port, path):
        resp = get_over(family, host, port, path)
        self.assertEqual(resp.status, 200, resp)
        self.assertIn(b"<html", resp.body.lower())

    def logged_peers(self):
        """{request target: client address} from the access log (read once spoold stopped)."""
        peers = {}
        with open(self.log_path, encoding="utf-8") as f:
            for line in f.read().splitlines():
                fields = line.split(" ")
                self.assertGreater(len(fields), 6, line)
                peers[fields[6]] = fields[0]
        return peers

    def check_one_client(self, bind, listening, family, client_host):
        """spoold on `bind` says `listening` in its startup line, serves one client of `family`
        at client_host and logs it as client_host."""
        server = self.start(bind)
        self.assertEqual(self.listening_host(server), listening)
        self.assert_serves(family, client_host, server.port, "/?one")
        server.stop()
        self.assertEqual(self.logged_peers(), {"/?one": client_host})

    def test_ipv6_loopback(self):
        self.check_one_client("::1", "[::1]", socket.AF_INET6, "::1")

    def test_bracketed_ipv6_loopback(self):
        self.check_one_client("[::1]", "[::1]", socket.AF_INET6, "::1")

    def test_dual_stack_serves_ipv4_and_ipv6_clients(self):
        for bind in ("::", "[::]"):
            with self.subTest(bind=bind):
                server = self.start(bind)
                self.assertEqual(self.listening_host(server), "[::]")
                self.assert_serves(socket.AF_INET, "127.0.0.1", server.port, "/?from=v4")
                self.assert_serves(socket.AF_INET6, "::1", server.port, "/?from=v6")
                server.stop()
                # The IPv4 client came in as ::ffff:127.0.0.1 and is logged as plain IPv4.
                self.assertEqual(self.logged_peers(),
                                 {"/?from=v4": "127.0.0.1", "/?from=v6": "::1"})
                os.remove(self.log_path)

    def test_ipv4_addresses_as_before(self):
        for bind in ("127.0.0.1", "0.0.0.0"):
            with self.subTest(bind=bind):
                self.check_one_client(bind, bind, socket.AF_INET, "127.0.0.1")
                os.remove(self.log_path)

    def test_bad_bind_exits_2(self):
        base = ["--port", "0", "--root", self.site, "--store", self.store]
        for bad in ("::g", "[::1", "::1]", "1.2.3.4.5", "[127.0.0.1]", "[]", "", "localhost",
                    "::1%lo", "127.0.0.1:8080"):
            with self.subTest(bind=bad):
                r = run_spoold(base + ["--bind", bad])
                self.assertEqual(r.returncode, 2, r)
                self.assertIn("bad value for --bind", r.stderr, r)
                self.assertNotIn("listening", r.stdout)
        r = run_spoold(base, env={"SPOOLD_BIND": "::g"})
        self.assertEqual(r.returncode, 2, r)
        self.assertIn("SPOOLD_BIND", r.stderr, r)


if __name__ == "__main__":
    main()
