"""Shared helpers for spoold's integration tests (Debian's python3, standard library only).

The tests start the real spoold binary (env SPOOLD) on a kernel-chosen loopback port with a
temporary copy of the demo site (env SPOOLD_SITE) and a temporary SQLite file, and talk to it
over raw sockets so that they control every byte sent (malformed requests, pipelining, partial
heads). Under sanitizers (env SPOOLD_SANITIZE = thread | address) spoold is several times slower:
every deadline is multiplied by SCALE and load tests pick smaller counts via scaled().
"""

import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

# One RESP client, HTTP helper, free port and polling wait serve the tests, cluster/fleet.py and
# the benchmarks (cluster/wire.py, standard library only).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "cluster"))
import wire  # noqa: E402
from wire import RespError, free_port  # noqa: E402,F401  (for the suites)

SANITIZE = os.environ.get("SPOOLD_SANITIZE", "")
SCALE = 5 if SANITIZE else 1

# The server architecture under test (spoold --model; spoold reads SPOOLD_MODEL itself).
# tests/server/CMakeLists.txt runs the suites once per model. A model that cannot honour a test
# (the iterative server with a second client, say) has the test assert what it does instead:
# server/models/README.md, "What each model honours".
MODEL = os.environ.get("SPOOLD_MODEL") or "epoll"
# Serves one connection at a time: every other client waits in the listen backlog.
ONE_AT_A_TIME = MODEL == "iterative"

# The host is an IPv4 address or a bracketed IPv6 one ("[::1]", --bind ::1).
LISTEN_RE = re.compile(r"spoold: listening on https?://([0-9.]+|\[[0-9a-fA-F:.]+\]):(\d+)/")
# The TLS listener's line (--tls-port, --tls-only), printed right after the listening line.
TLS_RE = re.compile(r"spoold: TLS on https://([0-9.]+|\[[0-9a-fA-F:.]+\]):(\d+)/")
CPU_LINE = "spoold: cpu user"
SANITIZER_MARKERS = (
    "WARNING: ThreadSanitizer",
    "ERROR: AddressSanitizer",
    "ERROR: LeakSanitizer",
    "runtime error:",
)

# A marker that exists only in a file outside the served root: no response may contain it.
OUTSIDE_MARKER = b"OUTSIDE-THE-ROOT-7f3a9c"
DOTFILE_MARKER = b"HIDDEN-DOTFILE-5e21b0"
HELLO = b"Hello from spoold's integration tests.\n"
BIG_SIZE = 2 * 1024 * 1024


def scaled(release_count, sanitized_count):
    """A count for load-style loops: smaller when spoold runs under a sanitizer."""
    return sanitized_count if SANITIZE else release_count


def deadline_after(seconds):
    return time.monotonic() + seconds * SCALE


def raise_nofile_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def spoold_binary():
    path = os.environ.get("SPOOLD", "")
    if not path or not os.access(path, os.X_OK):
        raise RuntimeError(f"env SPOOLD must name the spoold binary (got {path!r})")
    return path


def run_spoold(args, env=None, timeout=30):
    """spoold run to its exit (for command lines it refuses): the CompletedProcess, text."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([spoold_binary()] + args, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=full_env, timeout=timeout * SCALE)


# --------------------------------------------------------------------------------------------
# Temporary directories and the test site
# --------------------------------------------------------------------------------------------

class TempDir:
    """A directory removed at close(); kept (and printed) when SPOOLD_KEEP_TMP is set."""

    def __init__(self, prefix="spoold-it-"):
        self.path = tempfile.mkdtemp(prefix=prefix)

    def close(self):
        if os.environ.get("SPOOLD_KEEP_TMP"):
            print(f"keeping {self.path}", file=sys.stderr)
            return
        shutil.rmtree(self.path, ignore_errors=True)


_BIG_CACHE = {}


def big_file_bytes(size=BIG_SIZE):
    """Deterministic, non-repeating-looking content, so a misplaced range shows."""
    if size not in _BIG_CACHE:
        block = bytes((i * 131 + (i >> 8) * 7) & 0xFF for i in range(65536))
        # Each 64 KiB block XORed with its number, so equal offsets in different blocks differ.
        blocks = [block.translate(bytes(b ^ (n & 0xFF) for b in range(256)))
                  for n in range(size // len(block) + 1)]
        _BIG_CACHE[size] = b"".join(blocks)[:size]
    return _BIG_CACHE[size]


def make_site(base):
    """A copy of the demo site plus generated files at base/site; returns its path.

    Layout (besides the demo site's own files):
      hello.txt            small text (served from the cache)
      big.bin              2 MiB (sent with sendfile)
      p0.txt .. p19.txt    "file N\n", for pipelining order
      sub/index.html       directory with an index
      noindex/             directory without index.html (one file inside)
      inner-link.txt       symlink to hello.txt (stays inside: followed)
      escape.txt           symlink to /etc/hostname (leaves the root: refused)
      escape-dir           symlink to base/outside (leaves the root: refused)
      .secret              dotfile (never served)
    and base/outside/secret.txt, holding OUTSIDE_MARKER, beside the root.
    """
    site = os.path.join(base, "site")
    demo = os.environ.get("SPOOLD_SITE", "")
    if demo and os.path.isdir(demo):
        shutil.copytree(demo, site, symlinks=True)
    else:
        os.makedirs(site)
    outside = os.path.join(base, "outside")
    os.makedirs(outside, exist_ok=True)
    with open(os.path.join(outside, "secret.txt"), "wb") as f:
        f.write(OUTSIDE_MARKER + b"\n")

    def put(rel, data):
        path = os.path.join(site, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)

    put("hello.txt", HELLO)
    put("big.bin", big_file_bytes())
    for i in range(20):
        put(f"p{i}.txt", f"file {i}\n".encode())
    put("sub/index.html", b"<!doctype html><title>sub</title><p>sub index</p>\n")
    put("noindex/file.txt", b"a file in a directory without index\n")
    put(".secret", DOTFILE_MARKER + b"\n")
    os.symlink("hello.txt", os.path.join(site, "inner-link.txt"))
    os.symlink("/etc/hostname", os.path.join(site, "escape.txt"))
    os.symlink(outside, os.path.join(site, "escape-dir"))
    return site


def site_file(site, rel):
    with open(os.path.join(site, rel), "rb") as f:
        return f.read()


# --------------------------------------------------------------------------------------------
# The spoold process
# --------------------------------------------------------------------------------------------

class _Drain:
    """Reads one pipe of a child to the end in a thread, keeping every line."""

    def __init__(self, pipe, name):
        self.lines = []
        self.cond = threading.Condition()
        self.closed = False
        self.thread = threading.Thread(target=self._run, args=(pipe,), name=name, daemon=True)
        self.thread.start()

    def _run(self, pipe):
        for raw in iter(pipe.readline, b""):
            line = raw.decode("utf-8", "replace")
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        pipe.close()
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def wait_for(self, predicate, timeout):
        """First line satisfying predicate, or None at EOF / timeout."""
        end = time.monotonic() + timeout
        seen = 0
        with self.cond:
            while True:
                while seen < len(self.lines):
                    if predicate(self.lines[seen]):
                        return self.lines[seen]
                    seen += 1
                if self.closed:
                    return None
                left = end - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def text(self):
        with self.cond:
            return "".join(self.lines)


class Spoold:
    """One spoold process on 127.0.0.1 with a kernel-chosen port.

    Use as a context manager or call start() / stop(). stop() checks the clean-exit contract:
    exit status 0, the cpu line on stdout and, under sanitizers, no report on stderr.
    """

    def __init__(self, root, store, args=(), port=0, env=None, preexec_fn=None,
                 host="127.0.0.1"):
        self.root = root
        # The loopback address it listens on. A test that counts every connection the server
        # takes gives it an address of its own: a client of another test still retrying a
        # port that has closed (a store reconnecting to a Redis that was killed, a Sentinel)
        # reaches 127.0.0.1 only, even when the kernel hands that port number to this server.
        self.host = host
        self.store = store
        self.args = list(args)
        self.requested_port = port
        self.env = env
        self.preexec_fn = preexec_fn  # runs in the child before exec (resource limits)
        self.proc = None
        self.port = None
        self.tls_port = None  # with --tls-port or --tls-only
        self.out = None
        self.err = None
        self.returncode = None

    # -- lifecycle --

    def start(self):
        cmd = [spoold_binary(), "--port", str(self.requested_port), "--bind", self.host,
               "--root", self.root, "--store", self.store] + self.args
        # SPOOLD_MODEL runs the same tests against another server architecture; spoold reads
        # the variable itself, so nothing is added to the command line.
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env,
                                     preexec_fn=self.preexec_fn)
        self.out = _Drain(self.proc.stdout, "spoold-stdout")
        self.err = _Drain(self.proc.stderr, "spoold-stderr")
        line = self.out.wait_for(lambda l: LISTEN_RE.search(l) is not None, 30 * SCALE)
        if line is None:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"spoold did not print its listening line (exit {self.proc.returncode})\n"
                f"command: {' '.join(cmd)}\nstdout:\n{self.out.text()}\nstderr:\n{self.err.text()}")
        self.port = int(LISTEN_RE.search(line).group(2))
        if "--tls-port" in self.args or "--tls-only" in self.args:
            tls_line = self.out.wait_for(lambda l: TLS_RE.search(l) is not None, 10 * SCALE)
            if tls_line is None:
                raise AssertionError(f"spoold did not print its TLS line\n{self.out.text()}")
            self.tls_port = int(TLS_RE.search(tls_line).group(2))
        return self

    def __enter__(self):
        return self.start()

    def __exit__(self, exc_type, exc, tb):
        if self.proc is not None and self.proc.poll() is None and self.returncode is None:
            if exc_type is None:
                self.stop()
            else:
                self.kill()
        return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig):
        self.proc.send_signal(sig)

    def wait(self, timeout=30):
        try:
            self.returncode = self.proc.wait(timeout=timeout * SCALE)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"spoold did not exit within {timeout * SCALE} s\nstdout:\n{self.out.text()}\n"
                f"stderr:\n{self.err.text()}")
        self.out.thread.join(10 * SCALE)
        self.err.thread.join(10 * SCALE)
        return self.returncode

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signals spoold, waits for it and checks the clean-exit contract."""
        self.send_signal(sig)
        self.wait(timeout)
        self.check_clean_exit()

    def check_clean_exit(self):
        report = f"\nstdout:\n{self.out.text()[-4000:]}\nstderr:\n{self.err.text()[-8000:]}"
        if self.returncode != 0:
            raise AssertionError(f"spoold exited with {self.returncode}, expected 0{report}")
        if CPU_LINE not in self.out.text():
            raise AssertionError(f"spoold's stdout lacks {CPU_LINE!r}{report}")
        self.check_no_sanitizer_report()

    def check_no_sanitizer_report(self):
        err = self.err.text()
        for marker in SANITIZER_MARKERS:
            if marker in err:
                raise AssertionError(f"spoold's stderr has {marker!r}:\n{err[-12000:]}")

    def kill(self):
        """SIGKILL (durability tests); no exit checks beyond the sanitizer log so far."""
        self.proc.kill()
        self.returncode = self.proc.wait()
        self.out.thread.join(10 * SCALE)
        self.err.thread.join(10 * SCALE)
        self.check_no_sanitizer_report()

    # -- conveniences --

    def get(self, path, headers=None, method="GET", body=None, version="1.1"):
        return request(self.port, method, path, headers=headers, body=body, version=version,
                       host=self.host)

    def post_form(self, path, fields, headers=None):
        return request(self.port, "POST", path, body=form_body(fields),
                       headers={"Content-Type": "application/x-www-form-urlencoded",
                                **(headers or {})}, host=self.host)

    def metrics(self):
        resp = self.get("/metrics")
        if resp.status != 200:
            raise AssertionError(f"/metrics gave {resp.status}")
        return parse_prometheus(resp.body.decode())

    def metrics_once_admitted(self, timeout=30):
        """metrics(), retried while the connection is refused: after connections close, the
        server gives their places back when it sees them end, which can be after the client's
        close() returned, so a new connection may be refused (503) for a moment."""
        def served():
            resp = self.get("/metrics")
            return parse_prometheus(resp.body.decode()) if resp.status == 200 else None
        return wait_until(served, timeout, "/metrics to be served once places came back")


def sqlite_store(tmp):
    return "sqlite:" + os.path.join(tmp, "g.db")


class SiteTestCase(unittest.TestCase):
    """A fresh temp dir, site (self.site) and SQLite store spec (self.store) per test, for
    tests that start their own spoold."""

    def setUp(self):
        raise_nofile_limit()
        self.tmp = TempDir()
        self.site = make_site(self.tmp.path)
        self.store = sqlite_store(self.tmp.path)

    def tearDown(self):
        self.tmp.close()


class ServerTestCase(unittest.TestCase):
    """One spoold per test class: a fresh temp dir, site and SQLite store.

    Subclasses set `server_args`; `store_spec()` may be overridden. The server is stopped in
    tearDownClass with the clean-exit checks, and every test checks it is still running.
    """

    server_args = ()

    @classmethod
    def store_spec(cls):
        return sqlite_store(cls.tmp.path)

    @classmethod
    def setUpClass(cls):
        raise_nofile_limit()
        cls.tmp = TempDir()
        cls.site = make_site(cls.tmp.path)
        cls.server = Spoold(cls.site, cls.store_spec(), cls.server_args).start()

    @classmethod
    def tearDownClass(cls):
        try:
            if not cls.server.alive():
                raise AssertionError(f"spoold died: exit {cls.server.proc.returncode}\n"
                                     f"{cls.server.err.text()[-8000:]}")
            cls.server.stop()
        finally:
            cls.tmp.close()

    def tearDown(self):
        self.assertTrue(self.server.alive(),
                        f"spoold died: exit {self.server.proc.poll()}\n{self.server.err.text()}")

    def assert_still_serving(self):
        resp = self.server.get("/hello.txt")
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.body, HELLO)


# --------------------------------------------------------------------------------------------
# HTTP over raw sockets
# --------------------------------------------------------------------------------------------

class Response:
    def __init__(self, version, status, reason, headers, body):
        self.version = version
        self.status = status
        self.reason = reason
        self.headers = headers  # list of (name, value) in order
        self.body = body

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def __repr__(self):
        return (f"<Response {self.version} {self.status} {self.reason} "
                f"headers={self.headers} body={self.body[:200]!r}{'...' if len(self.body) > 200 else ''}>")


class ConnectionClosed(Exception):
    """EOF (or a reset) before a complete response."""


def _no_body(status, method):
    return method == "HEAD" or status in (204, 304) or 100 <= status < 200


class Conn:
    """A client connection that reads responses one at a time from a buffer."""

    def __init__(self, port, timeout=30, rcvbuf=None, sock=None, host="127.0.0.1"):
        if sock is None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            if rcvbuf is not None:
                # Before connect, so the advertised window is small from the start.
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            sock.settimeout(timeout * SCALE)
            sock.connect((host, port))
        self.sock = sock
        self.buf = b""
        self.eof = False

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def settimeout(self, seconds):
        self.sock.settimeout(seconds * SCALE)

    def send(self, data):
        """sendall that tolerates the server having answered and closed already (an error
        response to a request it refused before reading all of it)."""
        if isinstance(data, str):
            data = data.encode("latin-1")
        try:
            self.sock.sendall(data)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def _fill(self):
        if self.eof:
            return False
        try:
            chunk = self.sock.recv(1 << 16)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def read_head(self):
        while b"\r\n\r\n" not in self.buf:
            if not self._fill():
                raise ConnectionClosed(f"EOF before a complete head; got {self.buf[:300]!r}")
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        m = re.match(r"^(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise AssertionError(f"malformed status line {lines[0]!r}")
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise AssertionError(f"malformed header line {line!r}")
            headers.append((name.strip(), value.strip()))
        return m.group(1), int(m.group(2)), m.group(3), headers

    def read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise ConnectionClosed(f"EOF after {len(self.buf)} of {n} body bytes")
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, method="GET"):
        """One response; an interim 1xx response is returned as such (no body)."""
        version, status, reason, headers = self.read_head()
        resp = Response(version, status, reason, headers, b"")
        if _no_body(status, method):
            return resp
        length = resp.header("Content-Length")
        if length is not None:
            resp.body = self.read_exact(int(length))
        elif resp.header("Transfer-Encoding"):
            raise AssertionError(f"unexpected Transfer-Encoding in {resp!r}")
        else:
            while self._fill():
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def read_final_response(self, method="GET"):
        """Skips interim 1xx responses."""
        while True:
            resp = self.read_response(method)
            if not 100 <= resp.status < 200:
                return resp

    def read_to_eof(self):
        """Everything until the server closes; raises socket.timeout if it never does."""
        while self._fill():
            pass
        data, self.buf = self.buf, b""
        return data

    def closed_by_peer(self):
        """True when the next read sees EOF with no bytes (waits up to the socket timeout)."""
        return self.read_to_eof() == b""


def build_request(method, path, headers=None, body=None, version="1.1", host=True):
    if isinstance(body, str):
        body = body.encode("utf-8")
    lines = [f"{method} {path} HTTP/{version}"]
    hdrs = dict(headers or {})
    if host and not any(k.lower() == "host" for k in hdrs):
        lines.append("Host: 127.0.0.1")
    if body is not None and not any(k.lower() in ("content-length", "transfer-encoding")
                                    for k in hdrs):
        hdrs["Content-Length"] = str(len(body))
    for k, v in hdrs.items():
        lines.append(f"{k}: {v}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")


def request(port, method, path, headers=None, body=None, version="1.1", timeout=30,
            host="127.0.0.1"):
    """One request on a fresh connection (Connection: close); returns the final response."""
    hdrs = {"Connection": "close"}
    hdrs.update(headers or {})
    with Conn(port, timeout, host=host) as c:
        c.send(build_request(method, path, hdrs, body, version))
        return c.read_final_response(method)


def raw_exchange(port, data, timeout=30, method="GET"):
    """Sends raw bytes on a fresh connection and reads one final response."""
    with Conn(port, timeout) as c:
        c.send(data)
        return c.read_final_response(method)


def form_body(fields):
    from urllib.parse import urlencode
    return urlencode(fields).encode("ascii")


# --------------------------------------------------------------------------------------------
# /metrics
# --------------------------------------------------------------------------------------------

_PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(\s+\d+)?$')


def parse_prometheus(text):
    """{'name' or 'name{labels}': float}; raises on a line that is not exposition format."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _PROM_LINE.match(line)
        if not m:
            raise AssertionError(f"not a Prometheus sample line: {line!r}")
        key = m.group(1) + (m.group(2) or "")
        out[key] = float(m.group(3))
    return out


def run_in_threads(body, n):
    """Calls body(0) .. body(n - 1), each on a thread of its own, and waits for them all."""
    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def wait_until(predicate, timeout, what, interval=0.05):
    """Polls an external condition (another process's state) until true or a deadline (scaled
    by SCALE); AssertionError after it."""
    return wire.wait_for(predicate, timeout * SCALE, what, interval,
                         errors=(OSError, ConnectionClosed), failure=AssertionError)


# --------------------------------------------------------------------------------------------
# The guestbook page
# --------------------------------------------------------------------------------------------

def visitor_count(html):
    m = re.search(r'id="visitor-count"[^>]*>\s*([0-9]+)\s*<', html)
    if not m:
        raise AssertionError(f"no visitor-count element in the page:\n{html[:2000]}")
    return int(m.group(1))


def entries_section(html):
    """The HTML of the element with id="entries" (to the end of the page if unbalanced)."""
    i = html.find('id="entries"')
    if i < 0:
        raise AssertionError(f"no entries element in the page:\n{html[:2000]}")
    return html[i:]


# --------------------------------------------------------------------------------------------
# Redis
# --------------------------------------------------------------------------------------------

def resp_command(port, *args, timeout=5):
    """One Redis command to 127.0.0.1:port; returns the decoded reply (RespError for an error
    reply, ConnectionError for a connection closed before a complete one)."""
    return wire.redis_command("127.0.0.1", port, *args, timeout=timeout)


class Redis:
    """A private redis-server on a loopback port (data in `dir`)."""

    def __init__(self, dir, port=None, durable=False):
        self.dir = dir
        self.port = port or free_port()
        self.durable = durable
        self.proc = None

    def start(self):
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", self.dir,
               "--protected-mode", "no", "--daemonize", "no", "--logfile", ""]
        if self.durable:
            cmd += ["--save", "", "--appendonly", "yes", "--appendfsync", "always"]
        else:
            cmd += ["--save", "", "--appendonly", "no"]
        self.log = open(os.path.join(self.dir, f"redis-{self.port}.log"), "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT)
        end = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"redis-server exited with {self.proc.returncode}; "
                                     f"see {self.log.name}")
            try:
                if resp_command(self.port, "PING") == "PONG":
                    return self
            except (OSError, ConnectionClosed, RespError):
                pass
            if time.monotonic() > end:
                raise AssertionError("redis-server did not answer PING within 30 s")
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(30)
        if self.proc is not None:
            self.log.close()
        self.proc = None

    def kill(self):
        self.stop(signal.SIGKILL)

    def command(self, *args):
        return resp_command(self.port, *args)

    def spec(self):
        return f"redis://127.0.0.1:{self.port}"


def require_redis():
    if not shutil.which("redis-server") and not os.path.exists("/usr/bin/redis-server"):
        raise AssertionError("redis-server is missing: run scripts/install-deps.sh "
                             "(Debian package redis-server)")


def main():
    raise_nofile_limit()
    unittest.main(verbosity=2)


# --------------------------------------------------------------------------------------------
# Guestbook checks shared by the SQLite and the Redis tests
# --------------------------------------------------------------------------------------------

def html_escaped(text):
    """What the page shows for user text (the server escapes & < > " ')."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


ENTRY_RE = re.compile(r'<li class="entry"><span class="name">(.*?)</span>'
                      r'<p class="remarks">(.*?)</p></li>', re.S)


def page_entries(html):
    """[(name_html, remarks_html)] of the entries list, oldest first."""
    return ENTRY_RE.findall(entries_section(html))


def entry_total(html):
    m = re.search(r'id="entry-total"[^>]*>\s*([0-9]+)', html)
    if not m:
        raise AssertionError(f"no entry-total element in the page:\n{html[:2000]}")
    return int(m.group(1))


class GuestbookChecks:
    """Mixed into a ServerTestCase whose server has a fresh, empty store."""

    def page(self):
        resp = self.server.get("/guestbook")
        self.assertEqual(resp.status, 200, resp)
        self.assertTrue(resp.header("Content-Type", "").startswith("text/html"), resp)
        return resp.body.decode("utf-8")

    def post(self, name, remarks, expect=303):
        resp = self.server.post_form("/guestbook", {"guest-name": name, "guest-remarks": remarks})
        self.assertEqual(resp.status, expect, resp)
        if expect == 303:
            self.assertEqual(resp.header("Location"), "/guestbook")
        return resp

    def test_page_has_the_form(self):
        html = self.page()
        for ident in ("visitor-count", "entries", "guestbook-form", "guest-name",
                      "guest-remarks", "guest-submit"):
            with self.subTest(id=ident):
                self.assertIn(f'id="{ident}"', html)
        self.assertIn('name="guest-name"', html)
        self.assertIn('name="guest-remarks"', html)

    def test_visitor_counter_increments(self):
        first = visitor_count(self.page())
        second = visitor_count(self.page())
        third = visitor_count(self.page())
        self.assertEqual(second, first + 1)
        self.assertEqual(third, second + 1)

    def test_round_trip_with_escaping(self):
        cases = [
            ("Ada Lovelace", "First <script>alert(1)</script> & more"),
            ("O'Brien \"quoted\"", "line one\r\nline two"),
            ("Zoë 漢字", "unicode remarks: ✓ – done"),
            ("plus+sign", "100% sure; a=b&c=d"),
        ]
        for name, remarks in cases:
            self.post(name, remarks)
        html = self.page()
        self.assertNotIn("<script>alert(1)</script>", html)
        shown = page_entries(html)[-len(cases):]
        self.assertEqual(len(shown), len(cases), html)
        for (name, remarks), (name_html, remarks_html) in zip(cases, shown):
            with self.subTest(name=name):
                self.assertEqual(name_html, html_escaped(name))
                expected = "<br>\n".join(html_escaped(l) for l in remarks.split("\r\n"))
                self.assertEqual(remarks_html, expected)

    def test_total_and_order(self):
        before = entry_total(self.page())
        for i in range(5):
            self.post(f"order{i}", f"entry number {i}")
        html = self.page()
        self.assertEqual(entry_total(html), before + 5)
        names = [n for n, _ in page_entries(html)]
        self.assertEqual(names[-5:], [f"order{i}" for i in range(5)])

    def test_invalid_posts(self):
        before = entry_total(self.page())
        cases = (
            ({"guest-name": "", "guest-remarks": "x"}, 400),
            ({"guest-name": "   ", "guest-remarks": "x"}, 400),
            ({"guest-name": "x", "guest-remarks": ""}, 400),
            ({"guest-remarks": "no name field"}, 400),
            ({"guest-name": "no remarks field"}, 400),
            ({"guest-name": "n" * 65, "guest-remarks": "x"}, 400),
            ({"guest-name": "x", "guest-remarks": "r" * 1025}, 400),
            ({"guest-name": "x", "guest-remarks": "r" * 3000}, 400),
            ({"guest-name": "bad\x01name", "guest-remarks": "x"}, 400),
        )
        for fields, status in cases:
            with self.subTest(fields={k: v[:20] for k, v in fields.items()}):
                resp = self.server.post_form("/guestbook", fields)
                self.assertEqual(resp.status, status, resp)
        resp = self.server.get("/guestbook", method="POST", body=b"guest-name=%zz&guest-remarks=x",
                               headers={"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(resp.status, 400, resp)
        resp = self.server.get("/guestbook", method="POST", body=b'{"guest-name":"x"}',
                               headers={"Content-Type": "application/json"})
        self.assertEqual(resp.status, 415, resp)
        resp = self.server.get("/guestbook", method="POST", body=b"guest-name=x&guest-remarks=y")
        self.assertEqual(resp.status, 415, resp)  # no Content-Type at all
        # Limits are inclusive, and a charset parameter is fine.
        resp = self.server.post_form("/guestbook", {"guest-name": "n" * 64,
                                                    "guest-remarks": "r" * 1024},
                                     headers={"Content-Type":
                                              "application/x-www-form-urlencoded; charset=UTF-8"})
        self.assertEqual(resp.status, 303, resp)
        self.assertEqual(entry_total(self.page()), before + 1)

    def test_concurrent_posts(self):
        before = entry_total(self.page())
        threads_n, per_thread = 8, scaled(10, 4)
        errors = []

        def worker(t):
            for i in range(per_thread):
                try:
                    resp = self.server.post_form("/guestbook", {"guest-name": f"t{t}",
                                                                "guest-remarks": f"c{t}-{i}"})
                    if resp.status != 303:
                        errors.append(resp)
                except (OSError, ConnectionClosed) as e:
                    errors.append(e)

        run_in_threads(worker, threads_n)
        self.assertEqual(errors, [])
        html = self.page()
        self.assertEqual(entry_total(html), before + threads_n * per_thread)
        remarks = {r for _, r in page_entries(html)}
        for t in range(threads_n):
            for i in range(per_thread):
                self.assertIn(f"c{t}-{i}", remarks)
