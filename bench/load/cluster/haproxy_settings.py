#!/usr/bin/env python3
"""What the fleet's HAProxy settings cost, against nginx as the balancer in front of the same
nodes: requests/s and the balancer's CPU time per request. docs/scale-out.md says why each
setting is there.

    haproxy_settings.py --spoold PATH [--nodes N] [--rounds R] [--duration S] [--path /P]
                        [--connections C] [--close]

Starts one fleet (cluster/fleet.py, N nodes, on a 127.x.y.0/24 block of its own), then runs,
beside the fleet's own HAProxy and against the same nodes, each balancer below on a port of
its own:

    shipped       the fleet's generated config (cluster/haproxy.cfg.in)
    log-all       shipped, logging every request (not only failed ones: no dontlog-normal)
    no-log        shipped without the request and health-check log
    no-retry      shipped without L7 retries (retry-on conn-failure only): a request is no
                  longer copied for a retry
    buf16k        shipped with HAProxy's default buffers of 16 KiB (no tune.bufsize 8192)
    threads-1     shipped with one thread (nbthread 1) instead of one per core
    server-close  shipped with option http-server-close: a new connection to a node per request
    nginx         nginx, upstream with keepalive 128, proxy_http_version 1.1, no access log,
                  worker_processes auto (one per core), its default retries (a GET that meets a
                  dead node is sent to the next)
    nginx-1w      the same with one worker process

and node 1 directly. Each round measures every variant in turn with
`wrk -t 2 -c C -d S URL` (with --close, every request says Connection: close); prints per
variant the median and min-max requests/s over the rounds, the median CPU time the balancer
spent per request (utime + stime of its processes over the run, from /proc), and the ratio of
medians to `shipped`. Every process shares this machine's cores; compare within one run.
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
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "cluster"))
import fleet  # noqa: E402
import wire  # noqa: E402

VARIANTS = ("shipped", "log-all", "no-log", "no-retry", "buf16k", "threads-1", "server-close")


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
        elif variant == "log-all" and stripped == "option dontlog-normal":
            continue
        elif variant == "no-log" and (stripped.startswith("log ") or stripped in (
                "option httplog", "option log-health-checks", "option dontlog-normal")):
            continue
        elif variant == "no-retry" and stripped.startswith(("retry-on ", "http-request wait-for",
                                                            "http-request disable-l7",
                                                            "acl keyed_post")):
            continue
        elif variant == "threads-1" and stripped.startswith("maxconn "):
            line += "\n    nbthread 1"
        elif variant == "buf16k" and stripped.startswith("tune.bufsize "):
            continue
        elif variant == "server-close" and stripped.startswith("http-reuse "):
            line = "    option http-server-close"
        lines.append(line)
    return "\n".join(lines) + "\n"


def nginx_config(work, bind, nodes, workers):
    servers = "".join(f"    server {n.addr}:{n.port};\n" for n in nodes)
    temps = "".join(f"  {t}_temp_path {work}/{t}_temp;\n"
                    for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return (f"daemon off;\nmaster_process on;\nworker_processes {workers};\n"
            f"pid {work}/nginx.pid;\nerror_log {work}/nginx-error.log warn;\n"
            "events {\n  worker_connections 4096;\n  use epoll;\n}\n"
            "http {\n  access_log off;\n  keepalive_requests 100000;\n" + temps +
            "  upstream nodes {\n" + servers + "    keepalive 128;\n  }\n"
            f"  server {{\n    listen {bind} backlog=65535;\n"
            "    location / {\n      proxy_pass http://nodes;\n"
            "      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n"
            "    }\n  }\n}\n")


def cpu_seconds(pid):
    """utime + stime of `pid` and its children that run (nginx's workers), from /proc."""
    total = 0
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        children = []
    for p in [pid, *children]:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def wrk_run(url, duration, connections, close):
    cmd = ["wrk", "-t", "2", "-c", str(connections), "-d", f"{duration}s", url]
    if close:
        cmd[1:1] = ["-H", "Connection: close"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    if re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), requests


def nodes_up(stats_url, count):
    """Whether HAProxy's stats CSV at `stats_url` lists `count` nodes UP in backend spoold."""
    with urllib.request.urlopen(stats_url, timeout=5) as r:
        rows = r.read().decode().splitlines()
    return sum(1 for row in rows if row.startswith("spoold,web") and ",UP," in row) == count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spoold", required=True)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=100)
    ap.add_argument("--close", action="store_true", help="Connection: close on every request")
    ap.add_argument("--path", default="/")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="spool-haproxy-settings-")
    layout = fleet.Layout.free(nodes=args.nodes)
    f = fleet.Fleet(os.path.join(work, "state"), layout, args.spoold)
    procs = {}
    try:
        f.start()
        with open(os.path.join(f.dir, "conf", "haproxy.cfg")) as cfg_file:
            shipped = cfg_file.read()
        addr = layout.haproxy.addr
        urls = {}
        for v in (*VARIANTS, "nginx", "nginx-1w"):
            port, stats_port = wire.free_port(addr), wire.free_port(addr)
            while stats_port == port:
                stats_port = wire.free_port(addr)
            out = open(os.path.join(work, f"{v}.log"), "w")
            if v.startswith("nginx"):
                for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
                    os.makedirs(os.path.join(work, f"{t}_temp"), exist_ok=True)
                cfg = os.path.join(work, f"{v}.conf")
                with open(cfg, "w") as c:
                    c.write(nginx_config(work, f"{addr}:{port}", layout.nodes,
                                         "1" if v == "nginx-1w" else "auto"))
                procs[v] = subprocess.Popen(["nginx", "-p", work + "/", "-c", cfg, "-e",
                                             os.path.join(work, f"{v}-error.log")],
                                            stdout=out, stderr=subprocess.STDOUT)
            else:
                cfg = os.path.join(work, f"haproxy-{v}.cfg")
                with open(cfg, "w") as c:
                    c.write(variant_config(shipped, v, f"{addr}:{port}", f"{addr}:{stats_port}"))
                procs[v] = subprocess.Popen(["haproxy", "-db", "-f", cfg], stdout=out,
                                            stderr=subprocess.STDOUT)
                stats = f"http://{addr}:{stats_port}/;csv"
                # Every node UP in this HAProxy's own checks before it is measured.
                fleet.wait_for(lambda: nodes_up(stats, args.nodes), 30,
                               f"HAProxy {v}: every node UP", errors=(OSError,))
            urls[v] = f"http://{addr}:{port}{args.path}"
        for v in ("nginx", "nginx-1w"):
            fleet.wait_for(lambda: wire.http_status(urls[v]) == 200, 30, f"{v} to answer")
        node = layout.nodes[0]
        urls["direct"] = f"http://{node.addr}:{node.port}{args.path}"
        pids = {v: p.pid for v, p in procs.items()}
        pids["direct"] = f.proc(node.name).pid()

        rates = {v: [] for v in urls}
        cpu_us = {v: [] for v in urls}
        for r in range(args.rounds):
            for v in urls:
                before = cpu_seconds(pids[v])
                rate, requests = wrk_run(urls[v], args.duration, args.connections, args.close)
                cpu_us[v].append((cpu_seconds(pids[v]) - before) / requests * 1e6)
                rates[v].append(rate)
            print(f"round {r + 1}/{args.rounds}: " +
                  ", ".join(f"{v} {rates[v][-1]:.0f}" for v in urls), file=sys.stderr)
        base = statistics.median(rates["shipped"])
        print(f"{'variant':<13} {'req/s median':>12} {'min-max':>15} {'vs shipped':>10} "
              f"{'CPU us/req':>10}   (direct: the node's CPU)")
        for v, xs in rates.items():
            m = statistics.median(xs)
            print(f"{v:<13} {m:>12.0f} {min(xs):>7.0f}-{max(xs):<7.0f} {m / base:>9.2f}x "
                  f"{statistics.median(cpu_us[v]):>10.1f}")
    finally:
        for p in procs.values():
            p.terminate()
            p.wait(timeout=10)
        f.stop()


if __name__ == "__main__":
    main()
