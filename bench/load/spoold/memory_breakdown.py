#!/usr/bin/env python3
"""Where the memory of a wave of abandoned TLS handshakes stays in spoold.

    memory_breakdown.py --spoold PATH --model M [--connections N] [--after S]
                        [-- SPOOLD_ARGS...]

Starts spoold (--tls-only with a throwaway certificate, --threads 2:2 --loops 1, long
timeouts, plus SPOOLD_ARGS, e.g. --workers 3100 for prethreaded) on a free loopback port,
serves 20 TLS requests, and takes a snapshot; then N connections (default 1000) each send a
ClientHello, read the server's first flight, are held open for 1.5 s and closed, as
tests/server/memory_after_wave.py's MemoryAfterAbandonedHandshakesTest does; S seconds
(default 4) after they closed, when the trimmer has had its turns, it takes another.

A snapshot is the process's RSS, its mappings' resident KiB by kind (/proc/PID/smaps: 8 MiB
thread stacks, malloc's non-main arena heaps, the main heap, the rest), and what glibc's malloc
holds, read with gdb from the stopped process (this file is also the gdb script): the bytes of
its arenas, and of those the bytes free in their top chunks, in their bins and in their
fastbins, and in use; and the bytes that live threads keep in their tcaches (in use, as far as
the arenas and malloc_trim know). Prints both snapshots and the difference per connection.

Needs gdb and glibc's debugging symbols (libc6-dbg), and to be allowed to attach to spoold
(root, or kernel.yama.ptrace_scope 0)."""

import argparse
import os
import re
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # also when gdb runs this file
from local_setup import make_cert, raise_nofile_limit  # noqa: E402

try:
    import gdb  # this file run by gdb on the stopped spoold: print_malloc
except ImportError:
    gdb = None

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "..", "..", "..", "server", "site")
STACK = 8 << 20            # a thread's stack (the default RLIMIT_STACK)
HEAP_MAX = 64 << 20        # a non-main arena's heaps are aligned to this
KINDS = ("thread stacks", "arena heaps", "main heap", "other")


def print_malloc():
    """Run by gdb on the stopped spoold: one line of what malloc holds, in bytes."""
    import struct

    inferior = gdb.selected_inferior()

    def word(address):
        return struct.unpack("<Q", inferior.read_memory(address, 8).tobytes())[0]

    # struct malloc_chunk: prev_size, size, fd, bk. A fastbin's fd is mangled (safe-linking):
    # stored as (address of the fd field >> 12) ^ the next chunk.
    def chunk_size(chunk):
        return word(chunk + 8) & ~7

    arenas = system = top = bins = fast = 0
    main = gdb.parse_and_eval("&main_arena")
    arena = main
    while True:
        state = arena.dereference()
        arenas += 1
        system += int(state["system_mem"])
        top += chunk_size(int(state["top"]))
        for i in range(int(state["fastbinsY"].type.range()[1]) + 1):
            chunk = int(state["fastbinsY"][i])
            while chunk:
                fast += chunk_size(chunk)
                chunk = ((chunk + 16) >> 12) ^ word(chunk + 16)
        first_bin = int(state["bins"].address)
        for i in range(1, 128):  # bin_at(i): the list head, as a chunk, 16 bytes per bin
            head = first_bin + (i - 1) * 16 - 16
            chunk = word(head + 24)
            while chunk != head:
                bins += chunk_size(chunk)
                chunk = word(chunk + 24)
        arena = state["next"]
        if int(arena) == int(main):
            break
    tcached = with_tcache = 0
    for thread in inferior.threads():
        thread.switch()
        tcache = gdb.parse_and_eval("tcache")
        if int(tcache) == 0:
            continue
        with_tcache += 1
        counts = tcache.dereference()["counts"]
        # tcache bin i holds chunks of 32 + 16 i bytes
        tcache_bins = range(int(counts.type.range()[1]) + 1)
        tcached += sum(int(counts[i]) * (32 + 16 * i) for i in tcache_bins)
    print(f"MALLOC arenas={arenas} system={system} top={top} bins={bins} fastbins={fast} "
          f"in_use={system - top - bins - fast} tcached={tcached} "
          f"threads={len(inferior.threads())} with_tcache={with_tcache}")



def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit(f"no VmRSS for {pid}")


def mappings_kib(pid):
    """Resident KiB by kind of mapping. A thread stack is an anonymous 8 MiB read-write mapping;
    an arena heap starts at a multiple of 64 MiB (its reserved rest is not resident)."""
    kib = dict.fromkeys(KINDS, 0)
    kind = "other"
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)", line)
            if m:
                start, end, name = int(m[1], 16), int(m[2], 16), m[4]
                if name == "[heap]":
                    kind = "main heap"
                elif name:
                    kind = "other"
                elif end - start == STACK and m[3].startswith("rw"):
                    kind = "thread stacks"
                elif start % HEAP_MAX == 0:
                    kind = "arena heaps"
                else:
                    kind = "other"
            elif line.startswith("Rss:"):
                kib[kind] += int(line.split()[1])
    return kib


def snapshot(pid):
    figures = {"RSS": rss_kib(pid)}
    figures.update(mappings_kib(pid))
    out = subprocess.run(["gdb", "-q", "-batch", "-p", str(pid), "-x", os.path.abspath(__file__)],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True)
    line = next((x for x in out.stdout.splitlines() if x.startswith("MALLOC ")), None)
    if line is None:
        raise SystemExit(f"gdb read nothing from spoold (pid {pid}):\n{out.stdout}{out.stderr}")
    for field in line.split()[1:]:
        name, value = field.split("=")
        figures["malloc " + name] = int(value) // 1024 if name not in (
            "arenas", "threads", "with_tcache") else int(value)
    return figures


def tls_get(port, ctx):
    with socket.create_connection(("127.0.0.1", port), 30) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass


def client_hello():
    """A whole ClientHello, from a client that goes no further."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = ctx.wrap_bio(incoming, outgoing, server_side=False)
    try:
        client.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def abandoned_handshakes(port, n):
    hello = client_hello()
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port), 30)
            socks.append(s)
            s.sendall(hello)
        sel = selectors.DefaultSelector()
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        waiting, end = n, time.monotonic() + 60
        while waiting and time.monotonic() < end:
            for key, _ in sel.select(1.0):
                sel.unregister(key.fileobj)
                waiting -= 1
        sel.close()
        if waiting:
            raise SystemExit(f"{waiting} handshakes the server never answered")
        time.sleep(1.5)  # held open past a turn of the trimmer, as the test does
    finally:
        for s in socks:
            s.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spoold", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--after", type=float, default=4.0)
    p.add_argument("spoold_args", nargs="*")
    a = p.parse_args()
    raise_nofile_limit()
    with tempfile.TemporaryDirectory(prefix="memory-breakdown-") as workdir:
        cert, key = make_cert(workdir)
        args = [a.spoold, "--port", "0", "--bind", "127.0.0.1", "--root", SITE, "--model",
                a.model, "--store", "sqlite:" + os.path.join(workdir, "g.db"), "--tls-only",
                "on", "--tls-cert", cert, "--tls-key", key, "--idle-timeout", "600",
                "--header-timeout", "600", "--threads", "2:2", "--loops", "1"]
        proc = subprocess.Popen(args + a.spoold_args, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                preexec_fn=raise_nofile_limit)
        line = proc.stdout.readline().decode()
        m = re.search(r"listening on https://127\.0\.0\.1:(\d+)/", line)
        if not m:
            proc.kill()
            raise SystemExit(f"spoold did not start: {line!r}")
        port = int(m.group(1))
        try:
            ctx = ssl.create_default_context(cafile=cert)
            for _ in range(20):
                tls_get(port, ctx)
            idle = snapshot(proc.pid)
            abandoned_handshakes(port, a.connections)
            time.sleep(a.after)  # a hold, for the trimmer's turns (once a second)
            after = snapshot(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    print(f"spoold --model {a.model} {' '.join(a.spoold_args)}".rstrip() +
          f": {a.connections} abandoned TLS handshakes; KiB unless a count")
    print(f"| | idle | {a.after:g} s after the wave | difference per connection |")
    print("|---|---:|---:|---:|")
    for name in idle:
        per = (after[name] - idle[name]) / a.connections
        per_text = "" if name.endswith(("arenas", "threads", "with_tcache")) else f"{per:.1f}"
        print(f"| {name} | {idle[name]} | {after[name]} | {per_text} |")


if gdb is not None:
    print_malloc()
elif __name__ == "__main__":
    sys.exit(main())
