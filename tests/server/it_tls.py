#!/usr/bin/env python3
"""spoold over TLS (server/conn/tls.hpp): handshakes verified against a throwaway CA made with
the openssl command, ALPN, TLS 1.2 and 1.3, TLS 1.1 refused, session resumption, curl with
keep-alive, a file body (the send_file path) and a guestbook post, failed handshakes counted by
reason, and the certificate reloaded on SIGHUP while an established connection keeps working.

epoll and poll serve TLS on --tls-port beside plain HTTP; the other models serve it with
--tls-only on --port, and refuse --tls-port with a clear error.
"""

import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import unittest
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spoold_harness import (HELLO, MODEL, SCALE, ServerTestCase, SiteTestCase, Spoold,  # noqa: E402
                            TempDir, big_file_bytes, form_body, make_site, parse_prometheus,
                            raise_nofile_limit, run_spoold, sqlite_store)

TLS_PORT_MODELS = ("epoll", "poll")


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def make_ca(directory, name):
    """A self-signed CA (name.ca.pem, name.ca.key) in directory."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", f"{name}.ca.key", "-out", f"{name}.ca.pem", "-days", "2",
            "-subj", f"/CN={name} test CA", cwd=directory)
    return os.path.join(directory, f"{name}.ca.pem")


def make_server_cert(directory, ca, cert_path, key_path):
    """A certificate for 127.0.0.1 and localhost signed by CA `ca`, written to the given paths."""
    with open(os.path.join(directory, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key_path, "-out", "server.csr", "-subj", "/CN=localhost", cwd=directory)
    openssl("x509", "-req", "-in", "server.csr", "-CA", f"{ca}.ca.pem", "-CAkey", f"{ca}.ca.key",
            "-CAcreateserial", "-out", cert_path, "-days", "2", "-extfile", "san.ext",
            cwd=directory)


def tls_args(cert, key, extra=()):
    where = ["--tls-port", "0"] if MODEL in TLS_PORT_MODELS else ["--tls-only", "on"]
    return tuple(where) + ("--tls-cert", cert, "--tls-key", key) + tuple(extra)


def client_context(ca_file, minimum=None, maximum=None, alpn=("http/1.1",)):
    ctx = ssl.create_default_context(cafile=ca_file)
    if minimum:
        ctx.minimum_version = minimum
    if maximum:
        ctx.maximum_version = maximum
    if alpn:
        ctx.set_alpn_protocols(list(alpn))
    return ctx


def tls_connect(port, ctx, session=None, host="127.0.0.1"):
    # The certificate names 127.0.0.1, whatever loopback address the server listens on.
    raw = socket.create_connection((host, port), timeout=10 * SCALE)
    try:
        return ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
    except BaseException:
        raw.close()
        raise


def read_response(sock):
    """One response (Content-Length framed) from a socket: (status line, headers dict, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed mid-head: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError("connection closed mid-body")
        body += chunk
    return lines[0], headers, body


def get_over(sock, path):
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return read_response(sock)


def read_until_closed(sock):
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            return data
        if not chunk:
            return data
        data += chunk


class TlsCase:
    """Shared: the CA, the server's certificate, and /metrics over TLS."""

    @staticmethod
    def make_certs(directory):
        make_ca(directory, "one")
        cert = os.path.join(directory, "server.pem")
        key = os.path.join(directory, "server.key")
        make_server_cert(directory, "one", cert, key)
        return os.path.join(directory, "one.ca.pem"), cert, key

    def https(self, port, ca):
        return http.client.HTTPSConnection("127.0.0.1", port, timeout=10 * SCALE,
                                           context=client_context(ca))

    def tls_metrics(self, server, ca):
        conn = self.https(server.tls_port, ca)
        try:
            conn.request("GET", "/metrics")
            resp = conn.getresponse()
            self.assertEqual(resp.status, 200)
            return parse_prometheus(resp.read().decode())
        finally:
            conn.close()

    def failures(self, server, ca, reason):
        return self.tls_metrics(server, ca)[f'spoold_tls_handshake_failures_total{{reason="{reason}"}}']


class TlsTest(TlsCase, ServerTestCase):
    @classmethod
    def setUpClass(cls):
        raise_nofile_limit()
        cls.tmp = TempDir()
        cls.site = make_site(cls.tmp.path)
        cls.ca, cert, key = TlsCase.make_certs(cls.tmp.path)
        args = tls_args(cert, key, ("--header-timeout", str(2 * SCALE)))
        cls.server = Spoold(cls.site, sqlite_store(cls.tmp.path), args).start()

    def test_tls13_with_alpn(self):
        ctx = client_context(self.ca, ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3,
                             alpn=("h2", "http/1.1"))
        with tls_connect(self.server.tls_port, ctx) as s:
            self.assertEqual(s.version(), "TLSv1.3")
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
            status, _, body = get_over(s, "/hello.txt")
            self.assertEqual(status, "HTTP/1.1 200 OK")
            self.assertEqual(body, HELLO)

    def test_tls12_uses_ecdhe_and_aead(self):
        ctx = client_context(self.ca, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2)
        with tls_connect(self.server.tls_port, ctx) as s:
            self.assertEqual(s.version(), "TLSv1.2")
            name = s.cipher()[0]
            self.assertTrue(name.startswith("ECDHE-"), name)
            self.assertTrue("GCM" in name or "CHACHA20" in name, name)
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
            self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)

    def test_tls11_refused_and_counted(self):
        before = self.failures(self.server, self.ca, "protocol")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(self.ca)
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        with warnings.catch_warnings():  # deprecated: that is the point
            warnings.simplefilter("ignore", DeprecationWarning)
            ctx.minimum_version = ssl.TLSVersion.TLSv1
            ctx.maximum_version = ssl.TLSVersion.TLSv1_1
        with self.assertRaises(ssl.SSLError):
            tls_connect(self.server.tls_port, ctx).close()
        self.assertEqual(self.failures(self.server, self.ca, "protocol"), before + 1)

    def test_h2_only_client_refused(self):
        before = self.failures(self.server, self.ca, "alpn")
        with self.assertRaises(ssl.SSLError) as caught:
            tls_connect(self.server.tls_port, client_context(self.ca, alpn=("h2",))).close()
        self.assertIn("NO APPLICATION PROTOCOL", str(caught.exception).upper())
        self.assertEqual(self.failures(self.server, self.ca, "alpn"), before + 1)

    def check_resumption(self, version):
        ctx = client_context(self.ca, version, version)
        resumed_key = 'spoold_tls_handshakes_total{resumed="1"}'
        before = self.tls_metrics(self.server, self.ca)[resumed_key]
        with tls_connect(self.server.tls_port, ctx) as s:
            # TLS 1.3 tickets come after the handshake: read an answer so they have arrived.
            self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
            self.assertFalse(s.session_reused)
            session = s.session
        self.assertIsNotNone(session)
        for _ in range(3):
            with tls_connect(self.server.tls_port, ctx, session=session) as s:
                self.assertTrue(s.session_reused, version)
                self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
                session = s.session
        after = self.tls_metrics(self.server, self.ca)[resumed_key]
        self.assertGreaterEqual(after - before, 3)  # the /metrics calls may resume too

    def test_resumption_tls13(self):
        self.check_resumption(ssl.TLSVersion.TLSv1_3)

    def test_resumption_tls12(self):
        self.check_resumption(ssl.TLSVersion.TLSv1_2)

    def test_plaintext_gets_400_and_counted(self):
        before = self.failures(self.server, self.ca, "plaintext")
        with socket.create_connection(("127.0.0.1", self.server.tls_port), 10 * SCALE) as s:
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = read_until_closed(s)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer)
        self.assertIn(b"HTTPS", answer)
        self.assertEqual(self.failures(self.server, self.ca, "plaintext"), before + 1)

    def test_garbage_handshake_closed_and_counted(self):
        before = self.failures(self.server, self.ca, "protocol")
        with socket.create_connection(("127.0.0.1", self.server.tls_port), 10 * SCALE) as s:
            # A handshake record whose body is not a ClientHello.
            s.sendall(b"\x16\x03\x01\x00\x08garbage!")
            answer = read_until_closed(s)
        self.assertNotIn(b"HTTP/", answer)  # at most a TLS alert
        self.assertEqual(self.failures(self.server, self.ca, "protocol"), before + 1)

    def test_slow_handshake_closed_and_counted(self):
        before = self.failures(self.server, self.ca, "timeout")
        with socket.create_connection(("127.0.0.1", self.server.tls_port), 30 * SCALE) as s:
            s.sendall(b"\x16\x03\x01")  # the start of a record, and nothing more
            # spoold closes it after --header-timeout: the read ends instead of timing out.
            self.assertEqual(read_until_closed(s), b"")
        self.assertEqual(self.failures(self.server, self.ca, "timeout"), before + 1)
        self.assert_tls_serving()

    def assert_tls_serving(self):
        with tls_connect(self.server.tls_port, client_context(self.ca)) as s:
            self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)

    def test_curl_keep_alive_file_and_post(self):
        base = f"https://127.0.0.1:{self.server.tls_port}"
        out_dir = os.path.join(self.tmp.path, "curl")
        os.makedirs(out_dir, exist_ok=True)
        paths = ["/hello.txt", "/p1.txt", "/big.bin", "/p2.txt", "/big.bin"]
        cmd = ["curl", "-sS", "-v", "--http1.1", "--cacert", self.ca]
        for i, p in enumerate(paths):
            cmd += ["-o", os.path.join(out_dir, f"{i}.out"), base + p]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60 * SCALE)
        self.assertEqual(done.returncode, 0, done.stderr[-3000:])
        # One connection for every request.
        self.assertEqual(done.stderr.count("Re-using existing connection"), len(paths) - 1,
                         done.stderr[-3000:])
        expect = {"/hello.txt": HELLO, "/p1.txt": b"file 1\n", "/p2.txt": b"file 2\n",
                  "/big.bin": big_file_bytes()}
        for i, p in enumerate(paths):
            with open(os.path.join(out_dir, f"{i}.out"), "rb") as f:
                self.assertEqual(f.read(), expect[p], p)
        post = subprocess.run(
            ["curl", "-sS", "--cacert", self.ca, "-o", "/dev/null", "-w", "%{http_code}",
             "--data-binary", form_body({"guest-name": "tls-guest",
                                         "guest-remarks": "posted over TLS"}).decode(),
             "-H", "Content-Type: application/x-www-form-urlencoded", base + "/guestbook"],
            capture_output=True, text=True, timeout=60 * SCALE)
        self.assertEqual(post.stdout, "303", post.stderr)
        page = subprocess.run(["curl", "-sS", "--cacert", self.ca, base + "/guestbook"],
                              capture_output=True, text=True, timeout=60 * SCALE)
        self.assertIn("posted over TLS", page.stdout)

    def test_plain_port_still_plain(self):
        if MODEL not in TLS_PORT_MODELS:
            self.skipTest("--tls-only: the one port speaks TLS")
        resp = self.server.get("/hello.txt")
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.body, HELLO)


class TlsReloadTest(TlsCase, SiteTestCase):
    def test_sighup_switches_certificate_and_keeps_connections(self):
        d = self.tmp.path
        ca_one, cert, key = self.make_certs(d)
        ca_two = make_ca(d, "two")
        with Spoold(self.site, self.store, tls_args(cert, key)) as server:
            port = server.tls_port
            old = tls_connect(port, client_context(ca_one))
            try:
                self.assertEqual(get_over(old, "/hello.txt")[2], HELLO)
                # A certificate from another CA, in place of the files, then SIGHUP.
                make_server_cert(d, "two", cert, key)
                server.send_signal(signal.SIGHUP)
                self.assertIsNotNone(server.out.wait_for(
                    lambda l: "TLS certificate reloaded" in l, 10 * SCALE), server.out.text())
                with tls_connect(port, client_context(ca_two)) as s:
                    self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
                with self.assertRaises(ssl.SSLCertVerificationError):
                    tls_connect(port, client_context(ca_one)).close()
                # The connection made before the reload goes on.
                self.assertEqual(get_over(old, "/p3.txt")[2], b"file 3\n")

                # A broken certificate file: the reload fails, the current one stays.
                with open(cert, "w") as f:
                    f.write("not a certificate\n")
                server.send_signal(signal.SIGHUP)
                self.assertIsNotNone(server.err.wait_for(
                    lambda l: "TLS reload failed" in l, 10 * SCALE), server.err.text())
                with tls_connect(port, client_context(ca_two)) as s:
                    self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
                self.assertEqual(get_over(old, "/p4.txt")[2], b"file 4\n")
            finally:
                old.close()


class TlsIpv6Test(TlsCase, SiteTestCase):
    def test_tls_on_ipv6_loopback(self):
        ca, cert, key = self.make_certs(self.tmp.path)
        with Spoold(self.site, self.store, tls_args(cert, key, ("--bind", "::1"))) as server:
            self.assertIn("https://[::1]:", server.out.text())
            raw = socket.create_connection(("::1", server.tls_port), timeout=10 * SCALE)
            with client_context(ca).wrap_socket(raw, server_hostname="::1") as s:
                self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
                self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)


# The models that drive handshakes without giving each a thread: the event loops, and queue,
# whose handshake stage hands the pool a connection only once its handshake has ended.
HANDSHAKE_WITHOUT_THREAD = ("epoll", "poll", "queue")


@unittest.skipUnless(MODEL in HANDSHAKE_WITHOUT_THREAD, "a handshake holds its thread here")
class TlsSlowHandshakeHoldsNoThreadTest(TlsCase, SiteTestCase):
    def test_served_while_handshakes_wait(self):
        ca, cert, key = self.make_certs(self.tmp.path)
        # One pool thread (queue) or loop; handshakes may wait a minute.
        extra = ("--threads", "1:1", "--loops", "1", "--header-timeout", str(60 * SCALE))
        with Spoold(self.site, self.store, tls_args(cert, key, extra)) as server:
            slow = [socket.create_connection(("127.0.0.1", server.tls_port), 10 * SCALE)
                    for _ in range(3)]
            try:
                for s in slow:
                    s.sendall(b"\x16\x03\x01")  # a handshake begun, never finished
                with tls_connect(server.tls_port, client_context(ca)) as s:
                    self.assertEqual(get_over(s, "/hello.txt")[2], HELLO)
                # Served while every slow handshake is still open (none timed out yet).
                for s in slow:
                    s.setblocking(False)
                    with self.assertRaises(BlockingIOError):
                        s.recv(1)
            finally:
                for s in slow:
                    s.close()


@unittest.skipUnless(MODEL == "epoll", "the epoll model's loops, more of them than cores")
class TlsAcrossLoopsTest(TlsCase, SiteTestCase):
    """Four event loops, more than the cores here, each with its own listener on the TLS port:
    every handshake of many concurrent clients is served, plain HTTP beside them too, each
    handshake counted once, and the stop ends with exit 0."""

    CLIENTS = 8
    CONNECTIONS = 25  # each client's, one after another

    def test_concurrent_handshakes_across_loops_then_stop(self):
        ca, cert, key = self.make_certs(self.tmp.path)
        with Spoold(self.site, self.store, tls_args(cert, key, ("--loops", "4"))) as server:
            ctx = client_context(ca)
            problems = []

            def client():
                try:
                    for _ in range(self.CONNECTIONS):
                        with tls_connect(server.tls_port, ctx) as s:
                            status, _, body = get_over(s, "/hello.txt")
                            if not status.startswith("HTTP/1.1 200") or body != HELLO:
                                problems.append((status, body))
                except Exception as e:  # reported below, with every other client's
                    problems.append(repr(e))

            threads = [threading.Thread(target=client) for _ in range(self.CLIENTS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertEqual(problems, [])
            self.assertEqual(server.get("/hello.txt").body, HELLO)
            metrics = self.tls_metrics(server, ca)  # its own handshake is counted too
            handshakes = sum(v for k, v in metrics.items()
                             if k.startswith("spoold_tls_handshakes_total"))
            self.assertEqual(handshakes, self.CLIENTS * self.CONNECTIONS + 1)
            server.stop()


@unittest.skipIf(MODEL == "queue", "its handshake stage reads TLS from the first byte")
class TlsBehindProxyProtocolTest(TlsCase, SiteTestCase):
    """A trusted proxy's PROXY header comes before the TLS handshake, in plaintext: spoold
    reads it from the raw socket, then handshakes; the header's source is the client."""

    def test_proxy_header_then_handshake(self):
        ca, cert, key = self.make_certs(self.tmp.path)
        extra = ("--trust", "127.0.0.4/32", "--proxy-protocol", "--access-log", "-",
                 "--header-timeout", str(5 * SCALE))
        with Spoold(self.site, self.store, tls_args(cert, key, extra)) as server:
            port = server.tls_port
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            raw.settimeout(10 * SCALE)
            raw.bind(("127.0.0.4", 0))
            raw.connect(("127.0.0.1", port))
            raw.sendall(b"PROXY TCP4 192.0.2.44 127.0.0.1 40000 443\r\n")
            with client_context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
                self.assertEqual(get_over(s, "/hello.txt?proxied")[2], HELLO)
            line = server.out.wait_for(lambda l: "GET /hello.txt?proxied " in l, 30 * SCALE)
            self.assertIsNotNone(line, "no access-log line")
            self.assertTrue(line.startswith("192.0.2.44 "), line)

            # Without the header the trusted peer's handshake bytes are a bad header: closed
            # without an answer and counted as a header error, not as a handshake.
            bad = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            bad.settimeout(10 * SCALE)
            bad.bind(("127.0.0.4", 0))
            bad.connect(("127.0.0.1", port))
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                client_context(ca).wrap_socket(bad, server_hostname="127.0.0.1")
            bad.close()
            metrics = self.tls_metrics_from(server, ca)
            self.assertEqual(metrics.get("spoold_proxy_header_errors_total", 0), 1)

    def tls_metrics_from(self, server, ca):
        """/metrics over TLS through the proxy, with a LOCAL v2 header (the proxy itself)."""
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        raw.settimeout(10 * SCALE)
        raw.bind(("127.0.0.4", 0))
        raw.connect(("127.0.0.1", server.tls_port))
        raw.sendall(b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00")
        with client_context(ca).wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return parse_prometheus(get_over(s, "/metrics")[2].decode())


class TlsOptionsTest(SiteTestCase):
    def test_refusals(self):
        cases = [
            (["--tls-port", "0"], "--tls-port needs --tls-cert and --tls-key"),
            (["--tls-cert", "c.pem", "--tls-key", "k.pem"],
             "--tls-cert and --tls-key need --tls-port or --tls-only"),
            (["--tls-only", "on", "--tls-port", "0", "--tls-cert", "c", "--tls-key", "k"],
             "--tls-only and --tls-port exclude each other"),
            (["--tls-only", "maybe"], "bad value for --tls-only"),
        ]
        if MODEL not in TLS_PORT_MODELS:
            cases.append((["--tls-port", "0", "--tls-cert", "c", "--tls-key", "k"],
                          "--tls-port needs --model epoll or poll"))
        if MODEL == "queue":
            cases.append((["--tls-only", "on", "--tls-cert", "c", "--tls-key", "k", "--trust",
                           "127.0.0.4/32", "--proxy-protocol"],
                          "--proxy-protocol with --tls-only needs a model other than queue"))
        for args, message in cases:
            done = run_spoold(["--port", "0", "--store", self.store] + args)
            self.assertEqual(done.returncode, 2, (args, done.stderr))
            self.assertIn(message, done.stderr, args)

    def test_missing_certificate_fails_to_start(self):
        missing = os.path.join(self.tmp.path, "missing.pem")
        done = run_spoold(["--port", "0", "--store", self.store] +
                          list(tls_args(missing, missing)))
        self.assertEqual(done.returncode, 1, done.stderr)
        self.assertIn("certificate " + missing, done.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
