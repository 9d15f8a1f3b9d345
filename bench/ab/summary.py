#!/usr/bin/env python3
"""summary.py: min/median/max per revision of one numeric column of an ab.sh log.

    bench/ab/summary.py LOG COLUMN [MATCH]

COLUMN is the 0-based index of the field in the command's own CSV output (after ab.sh's
REV,RUN,LOAD1 prefix); only lines whose field is a number (and that contain MATCH, if
given) count. For spool-bench's --out CSV the median is column 8. COLUMN may also be a
ratio of two columns, "A/B" (spool-post-burst's "4/0": the submitter's cores over M tasks/s,
its CPU microseconds per post). Prints each revision's min/median/max, the load's range, and the ratio of the
medians (second revision over first).
"""
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    log, spec = sys.argv[1], sys.argv[2]
    num, _, den = spec.partition("/")
    num, den = int(num), (int(den) if den else None)
    match = sys.argv[3] if len(sys.argv) > 3 else None
    values, loads, order = {}, {}, []
    with open(log) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", 3)
            if len(parts) < 4:
                continue
            rev, _, load, rest = parts
            if match is not None and match not in rest:
                continue
            fields = rest.split(",")
            try:
                v = float(fields[num])
                if den is not None:
                    v /= float(fields[den])
            except (ValueError, IndexError, ZeroDivisionError):
                continue
            if rev not in values:
                order.append(rev)
                values[rev], loads[rev] = [], []
            values[rev].append(v)
            loads[rev].append(float(load))
    for rev in order:
        v = values[rev]
        print(f"{rev}: n={len(v)} min={min(v):.4g} median={statistics.median(v):.4g} "
              f"max={max(v):.4g} load {min(loads[rev]):.1f}-{max(loads[rev]):.1f}")
    if len(order) == 2:
        a, b = (statistics.median(values[r]) for r in order)
        print(f"median {order[1]} / {order[0]} = {b / a:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
