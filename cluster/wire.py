"""Talking to another process and waiting for it: a Redis (RESP2) client, one HTTP request, a
free port, and the bounded polling wait. The fleet (cluster/fleet.py and its parts), the tests
and the benchmarks import these from here. Python standard library only.

    import wire
    wire.redis_command(addr, port, "PING")          # "PONG"; one connection per command
    with wire.Connection(port) as c:                # or one connection for many
        c.command("CONFIG", "SET", "appendfsync", "always")
    wire.request(addr, port, "GET", "/")            # (status, headers, body), Connection: close
    wire.http_status("http://127.0.0.1:8080/")      # 200, 503, ... or None
    wire.free_port("127.0.0.1")                     # a port nothing listens on now
    wire.wait_for(lambda: ..., 30, "what")          # polls, raises wire.TimedOut after 30 s
"""

import http.client
import socket
import time
import urllib.error
import urllib.request


# ----------------------------------------------------------------------------------------------
# Redis protocol
# ----------------------------------------------------------------------------------------------

class RespError(Exception):
    """An error reply from Redis, or a reply that is not RESP."""


def encode(args):
    """One command as RESP: an array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


class Connection:
    """One connection to a Redis server (or a Sentinel). A reply is decoded as str (status),
    bytes (bulk string), int, list or None; an error reply raises RespError, a connection
    closed before a complete reply raises ConnectionError (an OSError)."""

    def __init__(self, port, host="127.0.0.1", timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def local_address(self):
        """"ADDR:PORT" of this end, as Redis names the client (CLIENT LIST, MONITOR)."""
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def command(self, *args):
        self.sock.sendall(encode(args))
        return self.reply()

    def reply(self):
        line = self.file.readline()
        if not line.endswith(b"\r\n"):
            raise ConnectionError("connection closed before a complete reply")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise RespError(f"not a RESP reply: {line[:80]!r}")

    def close(self):
        self.file.close()
        self.sock.close()


def redis_command(addr, port, *args, timeout=2.0):
    """Sends one command to addr:port on a connection of its own and returns the decoded reply.
    Raises OSError or RespError."""
    with Connection(port, addr, timeout) as c:
        return c.command(*args)


def info_fields(text):
    """INFO's reply as a dict of strings (section headers and blank lines left out)."""
    return dict(line.split(":", 1) for line in text.splitlines()
                if ":" in line and not line.startswith("#"))


def redis_info(addr, port, section="replication"):
    """INFO <section> of addr:port as a dict of strings."""
    return info_fields(redis_command(addr, port, "INFO", section).decode())


# ----------------------------------------------------------------------------------------------
# HTTP
# ----------------------------------------------------------------------------------------------

def request(addr, port, method, path, body=None, timeout=30):
    """One HTTP/1.1 request on a connection of its own ("Connection: close"; a body is sent as
    a form). Returns (status, headers, body). Raises OSError or http.client.HTTPException."""
    conn = http.client.HTTPConnection(addr, port, timeout=timeout)
    try:
        headers = {"Connection": "close"}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.headers, resp.read()
    finally:
        conn.close()


def http_status(url, timeout=5):
    """The status of a GET of `url`, or None when no answer came."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


# ----------------------------------------------------------------------------------------------
# Ports and waiting
# ----------------------------------------------------------------------------------------------

def free_port(addr="127.0.0.1"):
    """A port nothing listens on at `addr` right now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((addr, 0))
        return s.getsockname()[1]


class TimedOut(Exception):
    """wait_for's deadline passed before its condition held."""


def wait_for(predicate, timeout, what, interval=0.05, errors=(OSError, RespError),
             failure=TimedOut):
    """Polls predicate() (another process's state) until it returns something true, and returns
    that; an exception of `errors` counts as not yet. Raises `failure` naming `what` and the
    last value or error after `timeout` s."""
    end = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except errors as e:
            last = e
        if time.monotonic() > end:
            raise failure(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")
        time.sleep(interval)  # polling another process's state, bounded by `timeout`
