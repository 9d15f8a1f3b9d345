#!/usr/bin/env python3
"""summary.py: min/median/max per revision of one numeric column of an ab.sh log.

    bench/ab/summary.py LOG COLUMN [MATCH] [--above X]

COLUMN is the 0-based index of the field in the command's own CSV output (after ab.sh's
REV,RUN,LOAD1 prefix); only lines whose field is a number (and that contain MATCH, if
given) count. For spool-bench's --out CSV the median is column 8. COLUMN may also be a
ratio of two columns, "A/B" (spool-post-burst's "4/0": the submitter's cores over M tasks/s,
its CPU microseconds per post), or a NAME: the value of NAME=VALUE in the line (spool-bench's
extras, e.g. cpu_cores). Prints each revision's min/median/max, the load's range, and the ratio of the
medians (second revision over first). With --above X it also counts, per revision, the runs
whose value is above X, with the median of those above and of those at or below: for a path
whose runs fall into two modes (bench/ab/own_wait_modes.sh), how often each revision lands in
the upper one, which the median alone hides.
"""
import re
import statistics
import sys

# A value written with thousands separators (bench/queue/run.py: "8,347"); any other comma
# ends the value (a CSV field follows).
THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,])")


def named_value(text):
    m = THOUSANDS.match(text)
    return float(m.group().replace(",", "")) if m else float(text.split(",")[0])


def main():
    args = sys.argv[1:]
    above = None
    if "--above" in args:
        i = args.index("--above")
        if i + 1 >= len(args):
            print(__doc__, file=sys.stderr)
            return 2
        above = float(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    log, spec = args[0], args[1]
    key = None if spec.replace("/", "").isdigit() else spec + "="
    if key is None:
        num, _, den = spec.partition("/")
        num, den = int(num), (int(den) if den else None)
    match = args[2] if len(args) > 2 else None
    values, loads, order = {}, {}, []
    with open(log) as f:
        for line in f:
            parts = line.rstrip("\n").split(",", 3)
            if len(parts) < 4:
                continue
            rev, _, load, rest = parts
            if match is not None and match not in rest:
                continue
            try:
                if key is not None:
                    v = named_value(rest.split(key, 1)[1].split()[0])
                else:
                    fields = rest.split(",")
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
        if above is not None:
            hi = [x for x in v if x > above]
            lo = [x for x in v if x <= above]
            med = lambda xs: f"{statistics.median(xs):.4g}" if xs else "-"
            print(f"  above {above:g}: {len(hi)} of {len(v)} (median {med(hi)}); at or below: "
                  f"{len(lo)} (median {med(lo)})")
    if len(order) == 2:
        a, b = (statistics.median(values[r]) for r in order)
        print(f"median {order[1]} / {order[0]} = {b / a:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
