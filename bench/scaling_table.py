#!/usr/bin/env python3
"""Markdown tables from bench/scaling.sh's JSON files: per experiment and variant, spool's
median at each pool size, then its ratio to the best peer that ran it (> 1: spool ahead) and
that peer's name.

    bench/scaling_table.py scaling/*.json
"""
import json
import sys

SHORT = {"tbb_task_group": "tbb_tg", "tbb_arena": "tbb_arena", "asio": "asio", "omp": "omp",
         "mutex_pool": "mutex"}


def fmt(v):
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def table(doc):
    rows = [r for r in doc["rows"] if r.get("value")]
    sizes = sorted({r["threads"] for r in rows})
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    unit = rows[0]["unit"]
    command = doc["command"].split(" --out")[0].split(" ", 1)[1]
    print(f"`$B {command}` ({unit})\n")
    print("| variant | " + " | ".join(f"{t} threads" for t in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for v in variants:
        cells = []
        for t in sizes:
            here = [r for r in rows if r["variant"] == v and r["threads"] == t]
            mine = [r for r in here if r["peer"] == "spool"]
            peers = [r for r in here if r["peer"] in SHORT]
            if not mine or not peers:
                cells.append("")
                continue
            m = mine[0]["value"]["median"]
            hib = mine[0]["higher_is_better"]
            best = (max if hib else min)(peers, key=lambda r: r["value"]["median"])
            b = best["value"]["median"]
            ratio = m / b if hib else b / m
            cells.append(f"{fmt(m)}, **{ratio:.2f}x** {SHORT[best['peer']]}")
        if any(cells):
            print(f"| {v} | " + " | ".join(cells) + " |")
    print()


for path in sys.argv[1:]:
    with open(path) as f:
        table(json.load(f))
