#!/usr/bin/env python3
"""Two spoold binaries under the same HTTP load, interleaved: an A/B of a change.

    ab_http.py --a PATH --b PATH [--rounds R] [--concurrency C] [--duration S]
               [--connection keepalive,close] [--load-bench PATH] [-- MORE_HTTP_ARGS...]

Each round runs `spool-load-bench http --servers spoold --spoold BINARY --connection MODES
--concurrency C --duration S --repeat 1` once for each binary, A first in odd rounds and B
first in even ones, so that drift in a shared machine's load hits both alike. Prints, per
connection mode and concurrency, each binary's requests/s, CPU per request and p99 latency
(median and min-max over the rounds) and the per-round ratios B/A (median and min-max)."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(load_bench, binary, a, out):
    cmd = [load_bench, "http", "--servers", "spoold", "--spoold", binary, "--connection",
           a.connection, "--concurrency", a.concurrency, "--duration", str(a.duration),
           "--repeat", "1", "--out", out] + a.http_args
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(out) as f:
        rows = [r for r in json.load(f)["rows"]
                if r["experiment"] == "http" and r["unit"] == "req/s"]
    failed = [r for r in rows if "value" not in r]
    if done.returncode != 0 or failed or not rows:
        raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stdout}")
    # Requests/s, the server's CPU microseconds per request (its process's CPU seconds per wall
    # second over requests/s: on a machine others load too, it moves less), wrk's p99 latency in
    # ms, and wrk's errors.
    return {r["variant"]: (r["value"]["median"],
                           1e6 * r["extras"]["server_cores"]["median"] / r["value"]["median"],
                           r["extras"]["p99_ms"]["median"],
                           r["extras"]["errors"]["median"])
            for r in rows}


def spread(values, fmt):
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}-{fmt(max(values))})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", required=True, help="the baseline spoold")
    p.add_argument("--b", required=True, help="the changed spoold")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--concurrency", default="100")
    p.add_argument("--duration", type=int, default=5)
    p.add_argument("--connection", default="keepalive,close")
    p.add_argument("--load-bench", default=os.path.join(HERE, "..", "..", "..", "build",
                                                        "release", "bench", "load",
                                                        "spool-load-bench"))
    p.add_argument("http_args", nargs="*")
    a = p.parse_args()
    a.a, a.b, a.load_bench = (os.path.abspath(x) for x in (a.a, a.b, a.load_bench))
    runs = {"A": [], "B": []}
    with tempfile.TemporaryDirectory(prefix="ab-http-") as tmp:
        out = os.path.join(tmp, "run.json")
        for r in range(a.rounds):
            order = ("A", "B") if r % 2 == 0 else ("B", "A")
            for who in order:
                runs[who].append(run_once(a.load_bench, a.a if who == "A" else a.b, a, out))
            print(f"round {r + 1}/{a.rounds}: " + "; ".join(
                f"{v} B/A {runs['B'][-1][v][0] / runs['A'][-1][v][0]:.3f}"
                for v in runs["A"][-1]), file=sys.stderr, flush=True)
    print(f"A: {a.a}\nB: {a.b}\n{a.rounds} rounds, wrk over {a.duration} s each; median "
          "(min-max) over the rounds; B/A: per-round ratio (req/s: above 1, B served more; CPU "
          "per request and p99: below 1, B spent less, B's tail was shorter); errors: wrk's "
          "socket errors and non-2xx/3xx answers per run")
    print("| mode, concurrency | A req/s | B req/s | B/A req/s | A CPU us/req | B CPU us/req "
          "| B/A CPU/req | A p99 ms | B p99 ms | B/A p99 | A errors | B errors |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|")
    for variant in runs["A"][0]:
        cells = []
        for i, fmt in ((0, lambda v: f"{v / 1000:.1f}k"), (1, lambda v: f"{v:.1f}"),
                       (2, lambda v: f"{v:.2f}")):
            va = [run[variant][i] for run in runs["A"]]
            vb = [run[variant][i] for run in runs["B"]]
            ratios = [b / x for b, x in zip(vb, va)]
            cells += [spread(va, fmt), spread(vb, fmt), spread(ratios, lambda v: f"{v:.3f}")]
        for who in ("A", "B"):
            cells.append(spread([run[variant][3] for run in runs[who]], lambda v: f"{v:.0f}"))
        print(f"| {variant} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
