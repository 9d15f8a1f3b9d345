#!/usr/bin/env python3
"""A burst of abandoned connections against spoold, and what a normal client sees meanwhile.

    abandoned_burst.py --spoold PATH [--model M] [--connections N] [--sources K]
                       [--watch S] [--interval S] [--no-cork] [-- SPOOLD_ARGS...]

Starts spoold (its default options, plus SPOOLD_ARGS) on a free loopback port. A normal client
on 127.0.0.3 sends `GET /hello.txt` (Connection: close, a new connection each) every
--interval seconds, from just before the burst until --watch seconds after it began. The
burst: N connections, made one after another from K source addresses (127.0.0.20 and on),
each sending part of a request head and closing at once, keeping nothing open on this side.
The data and the FIN leave in one segment (TCP_CORK holds the data until close() attaches the
FIN), as they arrive when the server is slower to read than the client is to close; with
--no-cork they leave as two segments, and whether the server reads between them is chance.
A server that keeps such connections until its header timeout fills --max-connections with
them and answers everyone else 503 meanwhile.

Prints the burst's duration, the normal client's answers (200 / other status / errors, and
the share of 200), when its failures began and ended, and what /metrics says at the end
(connections open, refused past --max-connections)."""

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "..", "..", "..", "server", "site")
PARTIAL_HEAD = b"GET / HTTP/1.1\r\nHost: x\r\n"
NORMAL_CLIENT = "127.0.0.3"


def raise_nofile_limit():
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def start_spoold(binary, model, extra, workdir):
    cmd = [binary, "--port", "0", "--bind", "127.0.0.1", "--root", SITE, "--model", model,
           "--store", "sqlite:" + os.path.join(workdir, "g.db")] + extra
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, preexec_fn=raise_nofile_limit)
    line = proc.stdout.readline().decode()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
    if not m:
        proc.kill()
        raise SystemExit(f"spoold did not start: {line!r}")
    return proc, int(m.group(1))


def get(port, path, source=None, timeout=5.0):
    """The status of one GET on a new connection; raises OSError on a failed connection."""
    with socket.socket() as s:
        s.settimeout(timeout)
        if source:
            s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    m = re.match(rb"HTTP/1\.1 (\d{3}) ", data)
    if not m:
        raise OSError(f"no status line in {data[:80]!r}")
    return int(m.group(1)), data


def metric(port, name):
    _, data = get(port, "/metrics")
    m = re.search(rb"\n" + name.encode() + rb" (\d+)", data)
    return int(m.group(1)) if m else None


class NormalClient(threading.Thread):
    def __init__(self, port, interval):
        super().__init__(daemon=True)
        self.port = port
        self.interval = interval
        self.results = []  # (time, status or None for an error)
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            at = time.monotonic()
            try:
                status, _ = get(self.port, "/hello.txt", NORMAL_CLIENT)
            except OSError:
                status = None
            self.results.append((at, status))
            self.stop.wait(max(0.0, self.interval - (time.monotonic() - at)))


def burst(port, connections, sources, cork):
    for i in range(connections):
        with socket.socket() as s:
            s.bind((f"127.0.0.{20 + i % sources}", 0))
            s.connect(("127.0.0.1", port))
            if cork:
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
            s.sendall(PARTIAL_HEAD)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spoold", required=True)
    p.add_argument("--model", default="epoll")
    p.add_argument("--connections", type=int, default=10500)
    p.add_argument("--sources", type=int, default=10)
    p.add_argument("--watch", type=float, default=12.0)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--no-cork", dest="cork", action="store_false")
    p.add_argument("spoold_args", nargs="*")
    a = p.parse_args()
    raise_nofile_limit()
    with tempfile.TemporaryDirectory(prefix="abandoned-burst-") as workdir:
        proc, port = start_spoold(a.spoold, a.model, a.spoold_args, workdir)
        try:
            client = NormalClient(port, a.interval)
            client.start()
            time.sleep(0.5)  # a few answers before the burst, for the record
            began = time.monotonic()
            burst(port, a.connections, a.sources, a.cork)
            burst_s = time.monotonic() - began
            time.sleep(max(0.0, began + a.watch - time.monotonic()))
            client.stop.set()
            client.join()
            open_now = metric(port, "spoold_connections_open")
            refused = metric(port, "spoold_connections_refused_total")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    results = client.results
    ok = sum(1 for _, s in results if s == 200)
    other = sum(1 for _, s in results if s is not None and s != 200)
    errors = sum(1 for _, s in results if s is None)
    failed_at = [t - began for t, s in results if s != 200]
    print(f"spoold --model {a.model} {' '.join(a.spoold_args)}".rstrip())
    print(f"burst: {a.connections} abandoned connections from {a.sources} addresses in "
          f"{burst_s:.2f} s{'' if a.cork else ' (data and FIN in separate segments)'}")
    print(f"normal client: {len(results)} GETs, {ok} answered 200 ({100.0 * ok / len(results):.2f}%),"
          f" {other} other statuses, {errors} errors")
    if failed_at:
        print(f"  failures from {min(failed_at):+.2f} s to {max(failed_at):+.2f} s after the "
              "burst began")
    print(f"at {a.watch:.0f} s: {open_now - 1} connections open (besides /metrics' own), "
          f"{refused} refused past --max-connections")


if __name__ == "__main__":
    sys.exit(main())
