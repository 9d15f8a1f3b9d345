#!/usr/bin/env python3
"""Per-repeat figures of spool-bench's `empty` fire-and-forget rows, for telling the two ways a
pool keeps up with one submitter.

    build/release/bench/spool-bench empty --n 5000000 --threads 2 --repeat 15 --out e.json
    bench/empty_modes.py e.json

For each peer it prints every repeat's rate beside run_by_last_post (the share of the tasks
that had run when the last post returned), sorted by rate, then the median rate of the repeats
where the submitter ran ahead (run_by_last_post below --ahead, 0.5 by default) and of the rest.
"""
import argparse
import json
import statistics


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", nargs="+", help="spool-bench --out files")
    ap.add_argument("--ahead", type=float, default=0.5,
                    help="run_by_last_post below this counts as 'submitter ahead'")
    args = ap.parse_args()
    by_peer = {}
    for path in args.json:
        with open(path) as f:
            for row in json.load(f)["rows"]:
                if row["experiment"] != "empty" or not row["variant"].startswith("fire-and-forget"):
                    continue
                ran = row.get("sample_extras", {}).get("run_by_last_post")
                if not ran:
                    continue
                key = (row["peer"], row["variant"], row["threads"])
                by_peer.setdefault(key, []).extend(zip(row["samples"], ran))
    for (peer, variant, threads), pairs in sorted(by_peer.items()):
        print(f"{peer}  {variant}  threads={threads}")
        for rate, ran in sorted(pairs):
            print(f"  {rate / 1e6:8.2f} M/s   run_by_last_post={ran:.3f}")
        ahead = [r for r, ran in pairs if ran < args.ahead]
        kept = [r for r, ran in pairs if ran >= args.ahead]
        for label, rates in (("submitter ahead", ahead), ("workers kept up", kept)):
            if rates:
                print(f"  {label}: {len(rates)} repeats, median {statistics.median(rates) / 1e6:.2f} M/s")


if __name__ == "__main__":
    main()
