#!/usr/bin/env python3
"""timers_summary.py: an ab.sh log of `spool-bench timers` runs, per revision and peer.

    bench/ab/ab.sh -n 3 -t spool-bench REV_A REV_B -- bench/spool-bench timers \\
        --threads 2 --repeat 3 --peers spool,asio > LOG
    bench/ab/timers_summary.py LOG

For each revision and peer: the lateness p99 and p50 (us) and the process's cores, as
min/median/max over the runs (each run's figure is already the median of its repeats). Then,
per revision, spool's figures over Asio's from the same run (p99 and cores; below 1 means
spool is ahead), min/median/max over the runs.
"""
import re
import statistics
import sys


def fmt(xs):
    xs = sorted(xs)
    return f"{statistics.median(xs):.4g} ({xs[0]:.4g}-{xs[-1]:.4g})"


def number(text):
    """spool-bench's figures: plain, or with a k or M suffix (1.98M)."""
    scale = {"k": 1e3, "M": 1e6}.get(text[-1:], 1)
    return float(text[:-1] if scale != 1 else text) * scale


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    rows = {}  # (rev, run, peer) -> {"p99": .., "p50": .., "cores": ..}
    revs = []
    for line in open(sys.argv[1], encoding="utf-8"):
        parts = line.rstrip("\n").split(",", 3)
        if len(parts) < 4 or not parts[3].startswith("timers "):
            continue
        rev, run, _load, rest = parts
        fields = re.split(r"\s{2,}", rest.strip())
        if len(fields) < 8 or fields[1].endswith(":"):
            continue
        extras = dict(kv.split("=", 1) for kv in fields[-1].split() if "=" in kv)
        if "p50_us" not in extras:
            continue
        peer = fields[2]
        rows[(rev, run, peer)] = {
            "p99": number(fields[4]),
            "p50": number(extras["p50_us"]),
            "cores": number(extras["cpu_cores"]),
        }
        if rev not in revs:
            revs.append(rev)
    peers = sorted({p for (_, _, p) in rows})
    print("revision | peer | p99 us | p50 us | cores")
    for rev in revs:
        for peer in peers:
            got = [v for (r, _, p), v in rows.items() if r == rev and p == peer]
            if got:
                print(f"{rev} | {peer} | {fmt([g['p99'] for g in got])} | "
                      f"{fmt([g['p50'] for g in got])} | {fmt([g['cores'] for g in got])}")
    print("\nrevision | spool p99 / asio p99 | spool cores / asio cores (same run)")
    for rev in revs:
        p99, cores = [], []
        for (r, run, p), v in rows.items():
            other = rows.get((r, run, "asio"))
            if r == rev and p == "spool" and other:
                p99.append(v["p99"] / other["p99"])
                cores.append(v["cores"] / other["cores"])
        if p99:
            print(f"{rev} | {fmt(p99)} | {fmt(cores)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
