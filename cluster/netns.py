#!/usr/bin/env python3
"""Private networks for tests: hosts in network namespaces on a bridge of their own, where a
link can be cut, a pair of hosts partitioned, and latency or loss added between them.

Every host is a network namespace with one veth link to a bridge that lives in a namespace of
its own, and one address in a private /24 (10.77.0.0/24 unless told otherwise). No namespace has
a default route or any link but its own loopback and that veth, so a packet to those addresses
can only start inside a namespace the lab made, and nothing can leave the machine even if a step
fails (`Lab.check_isolated` proves it before a test sends load). Namespace names carry the
creating process's pid, so that two labs side by side never meet and a lab whose creator died
can be told apart and removed (`sweep_stale`).

    import netns
    with netns.Lab("fleet") as lab:                 # removed on exit, also on an exception
        redis = lab.add_host("redis1")              # -> Host(name, ns, addr="10.77.0.2")
        node = lab.add_host("web1")
        lab.check_isolated()
        p = lab.popen(redis, ["redis-server", ...])  # a process inside that namespace
        lab.enter(lab.add_host("client"))           # this thread's sockets now live there
        lab.partition([redis], [node])               # silent drop both ways, others unaffected
        lab.heal()                                    # every partition and delay removed
        lab.cut(node); lab.restore(node)             # the host's link down / up
        lab.delay([node], [redis], ms=50)            # 50 ms each way between them

Partitions are nftables rules in each host's namespace that drop the other side's packets, so
they drop silently as a real partition does, rather than failing a send at once as a blackhole
route would. Delays hold each packet in a netfilter queue for a fixed time (`netdelay`, built
from tests/tools/netdelay.c), for kernels without the netem qdisc. Needs root, iproute2,
nftables and iptables (Debian's packages); Python standard library only.
"""

import ctypes
import ipaddress
import os
import signal
import subprocess
import sys

PREFIX = "spoolnet"
CLONE_NEWNET = 0x40000000


class NetnsError(Exception):
    """A namespace, link or rule could not be made; the message holds the command and its
    error output."""


def _run(cmd, check=True):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)}: {r.stderr.strip() or r.stdout.strip()}")
    return r


def namespaces():
    r = _run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def sweep_stale():
    """Removes the namespaces of labs whose creating process no longer runs (a test killed
    before its clean-up). Returns their names."""
    gone = []
    for ns in namespaces():
        parts = ns.split("-")
        if len(parts) < 3 or parts[0] != PREFIX or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _run(["ip", "netns", "del", ns], check=False)
        gone.append(ns)
    return gone


def enter(ns):
    """Moves the calling thread into network namespace `ns` (a name under /run/netns); threads
    and processes it starts later inherit it."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    except OSError as e:
        raise NetnsError(f"namespace {ns}: {e.strerror}") from None
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NetnsError(f"setns into {ns}: {os.strerror(err)}")
    finally:
        os.close(fd)


class Host:
    def __init__(self, name, ns, addr, index):
        self.name = name
        self.ns = ns
        self.addr = addr
        self.index = index
        self.link = f"h{index}"  # the bridge's side of the host's veth, in the bridge namespace

    def __repr__(self):
        return f"Host({self.name!r}, {self.addr})"


class Lab:
    """A bridge and the hosts on it. Use as a context manager, or call close()."""

    def __init__(self, label, subnet="10.77.0.0/24", netdelay=None):
        if not label.isalnum():
            raise NetnsError(f"lab label {label!r}: letters and digits only")
        self.net = ipaddress.ip_network(subnet)
        self.base = f"{PREFIX}-{os.getpid()}-{label}"
        self.bridge_ns = f"{self.base}-br"
        self.hosts = []
        self.netdelay = netdelay or os.environ.get("SPOOL_NETDELAY", "netdelay")
        self._filtered = set()  # hosts whose namespace has the lab's nftables table
        self._delayers = []  # (host, netdelay process), one queue each
        self._closed = False
        self._old_handlers = {}
        sweep_stale()
        if self.bridge_ns in namespaces():
            raise NetnsError(f"namespace {self.bridge_ns} exists already")
        try:
            _run(["ip", "netns", "add", self.bridge_ns])
            _run(["ip", "-n", self.bridge_ns, "link", "set", "lo", "up"])
            _run(["ip", "-n", self.bridge_ns, "link", "add", "br0", "type", "bridge"])
            _run(["ip", "-n", self.bridge_ns, "link", "set", "br0", "up"])
        except BaseException:
            self.close()
            raise
        # A SIGTERM (ctest's timeout, a make that is stopped) still removes the namespaces.
        for sig in (signal.SIGTERM, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        if self._closed:
            # A second signal while close() runs (a stop that sends SIGTERM twice): the first
            # handler, still deleting, finishes and then ends the process.
            return
        self.close()
        signal.signal(signum, self._old_handlers.get(signum) or signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # -- hosts --

    def add_host(self, name):
        """A new namespace with one link to the bridge and the next free address."""
        index = len(self.hosts) + 1
        addr = str(self.net.network_address + index + 1)  # .1 stays free, as a gateway would
        ns = f"{self.base}-{name}"
        _run(["ip", "netns", "add", ns])
        try:
            _run(["ip", "-n", ns, "link", "set", "lo", "up"])
            link = f"h{index}"
            _run(["ip", "-n", self.bridge_ns, "link", "add", link, "type", "veth", "peer", "name",
                  "eth0", "netns", ns])
            _run(["ip", "-n", self.bridge_ns, "link", "set", link, "master", "br0"])
            _run(["ip", "-n", self.bridge_ns, "link", "set", link, "up"])
            _run(["ip", "-n", ns, "addr", "add", f"{addr}/{self.net.prefixlen}", "dev", "eth0"])
            _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        except BaseException:
            _run(["ip", "netns", "del", ns], check=False)
            raise
        host = Host(name, ns, addr, index)
        self.hosts.append(host)
        return host

    def host(self, name):
        for h in self.hosts:
            if h.name == name:
                return h
        raise NetnsError(f"no host {name!r} in lab {self.base}")

    def check_isolated(self):
        """Raises NetnsError unless every namespace of the lab lacks a default route and cannot
        route to an address outside the lab's subnet."""
        outside = "192.0.2.1"  # TEST-NET-1: never routed, used only as a route look-up
        for ns in [self.bridge_ns] + [h.ns for h in self.hosts]:
            routes = _run(["ip", "-n", ns, "route", "show", "default"]).stdout.strip()
            if routes:
                raise NetnsError(f"namespace {ns} has a default route: {routes}")
            if _run(["ip", "-n", ns, "route", "get", outside], check=False).returncode == 0:
                raise NetnsError(f"namespace {ns} can route to {outside}")
            links = _run(["ip", "-n", ns, "-o", "link", "show"]).stdout.splitlines()
            names = {line.split(":")[1].strip().split("@")[0] for line in links}
            allowed = {"lo", "eth0"} if ns != self.bridge_ns else (
                {"lo", "br0"} | {h.link for h in self.hosts})
            if not names <= allowed:
                raise NetnsError(f"namespace {ns} has links {sorted(names - allowed)} "
                                 "beyond the lab's")

    # -- processes --

    def command(self, host, cmd):
        """`cmd` prefixed so that it runs inside the host's namespace."""
        return ["ip", "netns", "exec", host.ns, *cmd]

    def popen(self, host, cmd, **kwargs):
        return subprocess.Popen(self.command(host, cmd), **kwargs)

    def enter(self, host):
        """Moves the calling thread into the host's namespace (threads it starts later inherit
        it). Call before starting threads that must stay outside."""
        enter(host.ns)

    # -- faults --

    def cut(self, host):
        """Takes the host's link down: it reaches nobody and nobody reaches it."""
        _run(["ip", "-n", self.bridge_ns, "link", "set", host.link, "down"])

    def restore(self, host):
        _run(["ip", "-n", self.bridge_ns, "link", "set", host.link, "up"])

    def _nft(self, host, *args):
        _run(["ip", "netns", "exec", host.ns, "nft", *args])

    def _drop_between(self, host, peer):
        if host.name not in self._filtered:
            self._nft(host, "add", "table", "inet", "lab")
            self._nft(host, "add", "chain", "inet", "lab", "out",
                      "{ type filter hook output priority 0 ; }")
            self._nft(host, "add", "chain", "inet", "lab", "in",
                      "{ type filter hook input priority 0 ; }")
            self._filtered.add(host.name)
        self._nft(host, "add", "rule", "inet", "lab", "out", "ip", "daddr", peer.addr, "drop")
        self._nft(host, "add", "rule", "inet", "lab", "in", "ip", "saddr", peer.addr, "drop")

    @staticmethod
    def _sides(side_a, side_b):
        for a in side_a:
            for b in side_b:
                if a is b:
                    raise NetnsError(f"{a.name} is on both sides")
                yield a, b

    def partition(self, side_a, side_b):
        """Every packet between a host of side_a and a host of side_b is dropped silently, both
        ways (an nftables rule in each host's namespace); traffic within a side and to hosts on
        neither side flows."""
        for a, b in list(self._sides(side_a, side_b)):
            self._drop_between(a, b)
            self._drop_between(b, a)

    def delay(self, side_a, side_b, ms):
        """Adds `ms` milliseconds to every packet between the two sides, each way (a round trip
        gains 2 * ms): each host's packets towards the other side go through a netfilter queue
        that `netdelay` (tests/tools/netdelay.c, path in $SPOOL_NETDELAY or `netdelay=`) holds
        for `ms` before letting them go, in order."""
        pairs = list(self._sides(side_a, side_b))
        for src_side, dst_side in ((side_a, side_b), (side_b, side_a)):
            for src in src_side:
                queue = len(self._delayers) + 1
                proc = self.popen(src, [self.netdelay, str(queue), str(int(ms))],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                ready = proc.stdout.readline()
                if "ready" not in ready:
                    proc.kill()
                    raise NetnsError(f"netdelay in {src.ns}: {ready}{proc.stdout.read()}")
                self._delayers.append((src, proc))
                for dst in dst_side:
                    _run(["ip", "netns", "exec", src.ns, "iptables-legacy", "-A", "OUTPUT", "-d",
                          dst.addr, "-j", "NFQUEUE", "--queue-num", str(queue),
                          "--queue-bypass"])
        return len(pairs)

    def heal(self):
        """Removes every partition and delay and brings every link up."""
        for h in self.hosts:
            if h.name in self._filtered:
                self._nft(h, "delete", "table", "inet", "lab")
        self._filtered.clear()
        for h in {id(src): src for src, _ in self._delayers}.values():
            _run(["ip", "netns", "exec", h.ns, "iptables-legacy", "-F", "OUTPUT"])
        for _, proc in self._delayers:
            proc.terminate()
            proc.wait()
        self._delayers.clear()
        for h in self.hosts:
            self.restore(h)

    # -- clean-up --

    def close(self):
        """Deletes every namespace of the lab (their links go with them). Processes still
        running inside keep a namespace with no links until they exit."""
        if self._closed:
            return
        self._closed = True
        for _, proc in self._delayers:
            proc.kill()
            proc.wait()
        for h in self.hosts:
            _run(["ip", "netns", "del", h.ns], check=False)
        _run(["ip", "netns", "del", self.bridge_ns], check=False)
        for sig, old in self._old_handlers.items():
            if signal.getsignal(sig) == self._on_signal:
                signal.signal(sig, old)
        left = [ns for ns in namespaces() if ns.startswith(self.base + "-")]
        if left:
            print(f"netns: could not remove {', '.join(left)}", file=sys.stderr)


if __name__ == "__main__":
    # `netns.py sweep` removes namespaces left by labs whose process died.
    if sys.argv[1:] == ["sweep"]:
        print("\n".join(sweep_stale()) or "nothing to remove")
        sys.exit(0)
    print("usage: netns.py sweep", file=sys.stderr)
    sys.exit(2)
