#!/usr/bin/env python3
"""The network lab of cluster/netns.py does what the fault tests rely on: hosts reach each
other over the bridge and nothing else; a partition drops exactly the pairs it names, both ways;
a cut link reaches nobody; a delay holds packets at least as long as asked; heal undoes all of
it; and every namespace is gone afterwards, also those of a lab whose process was killed."""

import os
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import netns  # noqa: E402

ECHO = """
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000))
s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(b"hi")
    c.close()
"""

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def reaches(dst, timeout=10.0):
    """From the lab's client host (this thread is inside it): connect and read the greeting.
    The bound is generous, since a loaded machine may be slow to schedule the echo server; a
    check that expects no answer passes a shorter one, as a dropped SYN is never answered."""
    try:
        with socket.create_connection((dst.addr, 7000), timeout=timeout) as s:
            return s.recv(2) == b"hi"
    except OSError:
        return False


def connect_seconds(dst):
    start = time.monotonic()
    with socket.create_connection((dst.addr, 7000), timeout=10):
        return time.monotonic() - start


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


def main():
    netdelay = os.environ.get("SPOOL_NETDELAY")
    if not netdelay or not os.access(netdelay, os.X_OK):
        print("SPOOL_NETDELAY must name the netdelay binary", file=sys.stderr)
        return 2
    with netns.Lab("check", netdelay=netdelay) as lab:
        client, server, other = (lab.add_host(n) for n in ("client", "server", "other"))
        lab.check_isolated()
        check(True, "every namespace lacks a default route and a route out")
        servers = [lab.popen(h, [sys.executable, "-c", ECHO], stdout=subprocess.PIPE, text=True)
                   for h in (server, other)]
        for p in servers:
            check(p.stdout.readline().strip() == "listening", "an echo server listens")
        lab.enter(client)
        check(reaches(server) and reaches(other), "the client reaches both hosts")

        lab.partition([client], [server])
        check(not reaches(server, timeout=2), "partitioned: client and server do not meet")
        check(reaches(other), "partitioned: the client still reaches a host on neither side")
        lab.heal()
        check(reaches(server), "healed: the client reaches the server again")

        lab.cut(server)
        check(not reaches(server, timeout=2), "cut: nobody reaches the server")
        check(reaches(other), "cut: other hosts are unaffected")
        lab.heal()
        check(reaches(server), "restored: the server is reachable")

        lab.delay([client], [server], 40)
        # A connect is one round trip: SYN out, SYN-ACK back, each held at least 40 ms. A lower
        # bound is a property of the queue (it never lets a packet go early), not a speed.
        took = connect_seconds(server)
        check(took >= 0.080, f"delayed: a connect took {took * 1000:.1f} ms (>= 80 expected)")
        check(reaches(server), "delayed: data still flows")
        lab.heal()
        for p in servers:
            p.kill()
            p.wait()
        base = lab.base
    check(namespaces(base) == [], "every namespace of the lab is removed on close")

    # A lab whose process dies without cleaning up is removed by the next lab's sweep.
    child = subprocess.Popen([sys.executable, "-c",
                              "import sys, time; sys.path.insert(0, %r); import netns\n"
                              "lab = netns.Lab('orphan'); lab.add_host('a')\n"
                              "print(lab.base, flush=True); time.sleep(600)"
                              % os.path.join(HERE, "..", "..", "cluster")],
                             stdout=subprocess.PIPE, text=True)
    orphan = child.stdout.readline().strip()
    check(len(namespaces(orphan)) == 2, "a second process's lab exists")
    child.send_signal(signal.SIGKILL)
    child.wait()
    netns.sweep_stale()
    check(namespaces(orphan) == [], "the killed process's namespaces are swept")

    if failures:
        print(f"{len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
