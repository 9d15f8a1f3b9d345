"""What a fleet is made of: where each part listens (Layout, an Endpoint per part) and the
timings and options it runs with (Settings). state.json holds both, as Layout.to_json() and
dataclasses.asdict(Settings) write them."""

import dataclasses
import random

import wire


@dataclasses.dataclass
class Endpoint:
    name: str
    addr: str
    port: int
    ns: str = ""  # the network namespace it runs in ("": the machine's own)

    @property
    def text(self):
        return f"{self.addr}:{self.port}"


@dataclasses.dataclass
class Layout:
    """The addresses of one fleet. redis[0] is the first primary, the others its replicas.
    client_ns: the namespace a client of a fleet on private networks runs in ("" otherwise)."""
    haproxy: Endpoint
    stats: Endpoint
    nodes: list
    redis: list
    sentinels: list
    client_ns: str = ""

    @staticmethod
    def standard(nodes=3, prefix="127.0.0", replicas=2):
        """`make cluster`'s layout: HAProxy on 127.0.0.1:8080 (stats :8404), node i (0 to 8) on
        127.0.0.(11+i):8080, Redis on 127.0.0.21-(21+replicas):6379, Sentinels on
        127.0.0.31-33:26379."""
        return Layout(
            haproxy=Endpoint("haproxy", f"{prefix}.1", 8080),
            stats=Endpoint("stats", f"{prefix}.1", 8404),
            nodes=[Endpoint(f"web{i + 1}", f"{prefix}.{11 + i}", 8080) for i in range(nodes)],
            redis=[Endpoint(f"redis{i + 1}", f"{prefix}.{21 + i}", 6379)
                   for i in range(1 + replicas)],
            sentinels=[Endpoint(f"sentinel{i + 1}", f"{prefix}.{31 + i}", 26379)
                       for i in range(3)])

    @staticmethod
    def in_lab(hosts, nodes=3, replicas=2):
        """The same shape with every part on a host of its own: hosts(name) returns the
        (namespace, address) of a new host named `name` (netns.Lab.add_host does). A host
        named "client" is made too, for whatever talks to the fleet. The ports are the
        standard ones: every host has its own."""
        def on_host(name, port):
            ns, addr = hosts(name)
            return Endpoint(name, addr, port, ns)
        haproxy = on_host("haproxy", 8080)
        layout = Layout(
            haproxy=haproxy,
            stats=Endpoint("stats", haproxy.addr, 8404, haproxy.ns),
            nodes=[on_host(f"web{i + 1}", 8080) for i in range(nodes)],
            redis=[on_host(f"redis{i + 1}", 6379) for i in range(1 + replicas)],
            sentinels=[on_host(f"sentinel{i + 1}", 26379) for i in range(3)])
        layout.client_ns = hosts("client")[0]
        return layout

    def host_names(self):
        """Every part that needs a host of its own, and the client."""
        return ["haproxy", *(e.name for e in self.nodes + self.redis + self.sentinels),
                "client"]

    @staticmethod
    def free(nodes=3, prefix=None, replicas=2):
        """The standard shape on a /24 of its own, 127.x.y.0 with x and y chosen at random
        (unless `prefix` says "127.x.y"), and on each address a port the kernel says is free:
        for tests and benchmarks that must not meet a `make cluster` or each other."""
        if prefix is None:
            prefix = f"127.{random.randint(100, 254)}.{random.randint(1, 254)}"
        layout = Layout.standard(nodes, prefix, replicas)
        taken = set()
        for e in layout.endpoints():
            e.port = wire.free_port(e.addr)
            while (e.addr, e.port) in taken:  # HAProxy and its stats share an address
                e.port = wire.free_port(e.addr)
            taken.add((e.addr, e.port))
        return layout

    def endpoints(self):
        return [self.haproxy, self.stats, *self.nodes, *self.redis, *self.sentinels]

    def to_json(self):
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d):
        one = lambda e: Endpoint(**e)  # noqa: E731
        return Layout(one(d["haproxy"]), one(d["stats"]), [one(e) for e in d["nodes"]],
                      [one(e) for e in d["redis"]], [one(e) for e in d["sentinels"]],
                      d.get("client_ns", ""))


@dataclasses.dataclass
class Settings:
    """Timings and options; the defaults are `make cluster`'s."""
    # Sentinel (docs/scale-out.md says why each): how long without an answer before the
    # primary is down, for the first Sentinel; each next one waits down_after_step_ms longer,
    # so that they see a dead primary one after another and do not split the vote. How often a
    # Sentinel PINGs every instance and asks it for INFO (SENTINEL DEBUG ping-period and
    # info-period, set at each start: they are not kept in the config). A failover that stalls
    # is abandoned after failover_timeout_ms. Two of the three must agree that the primary is
    # down.
    down_after_ms: int = 500
    down_after_step_ms: int = 100
    sentinel_ping_period_ms: int = 250
    sentinel_info_period_ms: int = 1000
    failover_timeout_ms: int = 5000
    quorum: int = 2
    # spoold: /healthz fails this long on SIGTERM before the node stops accepting; a post is
    # acknowledged once this many replicas have it, waiting at most replica_timeout_s.
    drain_delay_s: float = 3.0
    store_replicas: int = 1
    replica_timeout_s: float = 1.0
    spoold_args: list = dataclasses.field(default_factory=list)
