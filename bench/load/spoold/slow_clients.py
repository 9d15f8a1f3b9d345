#!/usr/bin/env python3
"""How long a client waits for an answer while slow clients hold spoold's connections.

    slow_clients.py --spoold PATH --model M [--slow N] [--kind head|handshake|idle]
                    [--repeat R] [-- SPOOLD_ARGS...]

R times: starts spoold (its defaults, plus SPOOLD_ARGS; --tls-only with a throwaway
certificate for --kind handshake) on a free loopback port, opens N slow connections that stay
open and silent: each sends part of a request head (head), the first bytes of a TLS handshake
(handshake), or one whole request and then nothing (idle); then a client on 127.0.0.3 sends
GET /hello.txt (plain, or over TLS) on a new connection and the time to its answer is taken (a
client that gets no answer in 60 s counts as 60 s); then everything is closed and spoold
stopped. Prints each time and the min/median/max. The slow connections are opened one after
another, before the timed client; in the models with a fixed number of workers, those the
workers do not hold wait in the listen backlog ahead of it."""

import argparse
import os
import re
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from local_setup import make_cert, raise_nofile_limit

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "..", "..", "..", "server", "site")
GIVE_UP_S = 60.0



def slow_connection(port, kind):
    s = socket.create_connection(("127.0.0.1", port), 10)
    if kind == "head":
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n")
    elif kind == "handshake":
        s.sendall(b"\x16\x03\x01")
    else:  # idle: one request, whose answer is left unread
        s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n")
    return s


def timed_get(port, tls_ctx):
    began = time.monotonic()
    try:
        raw = socket.socket()
        raw.settimeout(GIVE_UP_S)
        raw.bind(("127.0.0.3", 0))
        raw.connect(("127.0.0.1", port))
        s = tls_ctx.wrap_socket(raw, server_hostname="127.0.0.1") if tls_ctx else raw
        with s:
            s.sendall(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        ok = data.startswith(b"HTTP/1.1 200 ")
    except OSError:
        ok = False
    return time.monotonic() - began, ok


def one_run(a):
    """A fresh spoold and N fresh slow clients; the timed client's (seconds, answered)."""
    with tempfile.TemporaryDirectory(prefix="slow-clients-") as workdir:
        args = [a.spoold, "--port", "0", "--bind", "127.0.0.1", "--root", SITE, "--model",
                a.model, "--store", "sqlite:" + os.path.join(workdir, "g.db")]
        tls_ctx = None
        if a.kind == "handshake":
            cert, key = make_cert(workdir)
            args += ["--tls-only", "on", "--tls-cert", cert, "--tls-key", key]
            tls_ctx = ssl.create_default_context(cafile=cert)
        proc = subprocess.Popen(args + a.spoold_args, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                preexec_fn=raise_nofile_limit)
        line = proc.stdout.readline().decode()
        m = re.search(r"listening on https?://127\.0\.0\.1:(\d+)/", line)
        if not m:
            proc.kill()
            raise SystemExit(f"spoold did not start: {line!r}")
        port = int(m.group(1))
        slow = []
        try:
            slow = [slow_connection(port, a.kind) for _ in range(a.slow)]
            return timed_get(port, tls_ctx)
        finally:
            for s in slow:
                s.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spoold", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--slow", type=int, default=8)
    p.add_argument("--kind", choices=("head", "handshake", "idle"), default="head")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("spoold_args", nargs="*")
    a = p.parse_args()
    raise_nofile_limit()
    times = []
    for _ in range(a.repeat):
        took, ok = one_run(a)
        times.append(took if ok else GIVE_UP_S)
        print(f"  {took:.3f} s{'' if ok else ' (no answer)'}", flush=True)
    print(f"spoold --model {a.model} {' '.join(a.spoold_args)}".rstrip() +
          f": {a.slow} slow clients ({a.kind}); a client's answer in "
          f"{min(times):.3f} / {statistics.median(times):.3f} / {max(times):.3f} s "
          f"(min / median / max of {len(times)})")


if __name__ == "__main__":
    sys.exit(main())
