#!/usr/bin/env python3
"""What two of the fleet's HAProxy settings cost in throughput: the per-request log
(`log` + `option httplog`) and a new connection to the node per request
(`option http-server-close`). docs/scale-out.md says why both are there.

    haproxy_settings.py --spoold PATH [--nodes N] [--rounds R] [--duration S] [--path /P]

Starts one fleet (cluster/fleet.py, N nodes, on a 127.x.y.0/24 block of its own), then runs,
beside the fleet's own HAProxy and against the same nodes, HAProxy with each variant of the
fleet's generated config on a port of its own:

    shipped        the config as generated (cluster/haproxy.cfg.in)
    no-log         without the request and health-check log lines
    keep-alive     without option http-server-close: connections to the nodes are reused
    neither        both changes

and node 1 directly. Each round measures every variant in turn with
`wrk -t 2 -c 100 -d S --latency URL` (wrk is the load, not synchronisation); prints per variant
the median and min-max requests/s over the rounds, and the ratio of medians to `shipped`.
Every process shares this machine's cores; compare the ratios, not the absolute rates.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "cluster"))
import fleet  # noqa: E402

VARIANTS = ("shipped", "no-log", "keep-alive", "neither")


def variant_config(text, variant, bind, stats_bind):
    """The fleet's haproxy.cfg as `variant`, listening on `bind` (stats on `stats_bind`)."""
    lines = []
    section = None
    for line in text.splitlines():
        stripped = line.strip()
        if line and not line[0].isspace():
            section = stripped
        if section == "frontend fleet" and stripped.startswith("bind "):
            line = f"    bind {bind}"
        elif section == "listen stats" and stripped.startswith("bind "):
            line = f"    bind {stats_bind}"
        elif variant in ("no-log", "neither") and (
                stripped.startswith("log ") or stripped in ("option httplog",
                                                            "option log-health-checks")):
            continue
        elif variant in ("keep-alive", "neither") and stripped == "option http-server-close":
            continue
        lines.append(line)
    return "\n".join(lines) + "\n"


def wrk_rate(url, duration):
    out = subprocess.run(["wrk", "-t", "2", "-c", "100", "-d", f"{duration}s", "--latency", url],
                         capture_output=True, text=True, check=True).stdout
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)|Socket errors", out)
    if errors:
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spoold", required=True)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--path", default="/")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="spool-haproxy-settings-")
    layout = fleet.Layout.free(nodes=args.nodes)
    f = fleet.Fleet(os.path.join(work, "state"), layout, args.spoold)
    procs = {}
    try:
        f.start()
        shipped = open(os.path.join(f.dir, "conf", "haproxy.cfg")).read()
        urls = {}
        for v in VARIANTS:
            addr = layout.haproxy.addr
            port, stats_port = fleet.free_port(addr), fleet.free_port(addr)
            while stats_port == port:
                stats_port = fleet.free_port(addr)
            cfg = os.path.join(work, f"haproxy-{v}.cfg")
            with open(cfg, "w") as out:
                out.write(variant_config(shipped, v, f"{addr}:{port}", f"{addr}:{stats_port}"))
            log = open(os.path.join(work, f"haproxy-{v}.log"), "w")
            procs[v] = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=log,
                                        stderr=subprocess.STDOUT)
            urls[v] = f"http://{addr}:{port}{args.path}"
            stats = f"http://{addr}:{stats_port}/;csv"
            # Every node UP in this HAProxy's own checks before it is measured.
            fleet.wait_for(lambda: nodes_up(stats) == args.nodes, 30,
                           f"HAProxy {v}: every node UP", errors=(OSError,))
        node = layout.nodes[0]
        urls["direct"] = f"http://{node.addr}:{node.port}{args.path}"

        rates = {v: [] for v in urls}
        for r in range(args.rounds):
            for v in urls:
                rates[v].append(wrk_rate(urls[v], args.duration))
            print(f"round {r + 1}/{args.rounds}: " +
                  ", ".join(f"{v} {rates[v][-1]:.0f}" for v in urls), file=sys.stderr)
        base = statistics.median(rates["shipped"])
        print(f"{'variant':<12} {'req/s median':>12} {'min-max':>15} {'vs shipped':>10}")
        for v, xs in rates.items():
            m = statistics.median(xs)
            print(f"{v:<12} {m:>12.0f} {min(xs):>7.0f}-{max(xs):<7.0f} {m / base:>9.2f}x")
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        f.stop()


def nodes_up(stats_url):
    """How many nodes HAProxy's stats CSV at `stats_url` lists as UP."""
    with urllib.request.urlopen(stats_url, timeout=5) as r:
        rows = r.read().decode().splitlines()
    return sum(1 for row in rows if row.startswith("spoold,web") and ",UP," in row)


if __name__ == "__main__":
    main()
