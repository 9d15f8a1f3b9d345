"""The samples of a run and its tables: median and min-max over the repeats, and each peer's
ratio to spool from the same run, oriented so that > 1 means spool is ahead."""

import platform
import statistics


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), named beside every table."""
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


# metric -> (label, higher is better)
METRICS = {
    "jobs_per_s": ("jobs/s end to end", True),
    "submit_per_s": ("jobs/s submitted", True),
    "start_p50_us": ("submit->start p50 us", False),
    "start_p99_us": ("submit->start p99 us", False),
    "result_p50_us": ("submit->result p50 us", False),
    "result_p99_us": ("submit->result p99 us", False),
    "send_lag_p99_us": ("send lag p99 us", False),
    "worker_cpu_us": ("worker CPU us/job", False),
    "redis_cpu_us": ("redis CPU us/job", False),
    "redis_cmd_us": ("redis in commands us/job", False),
    "producer_cpu_us": ("producer CPU us/job", False),
}


def sample_of(scenario, out, jobs, cpu_workers_s, cpu_redis_s, cpu_producer_s, redis_cmd_s):
    s = {"worker_cpu_us": cpu_workers_s * 1e6 / jobs, "redis_cpu_us": cpu_redis_s * 1e6 / jobs,
         "redis_cmd_us": redis_cmd_s * 1e6 / jobs, "producer_cpu_us": cpu_producer_s * 1e6 / jobs}
    if scenario == "rate":
        s.update(start_p50_us=out["start_us"]["p50"], start_p99_us=out["start_us"]["p99"],
                 result_p50_us=out["result_us"]["p50"], result_p99_us=out["result_us"]["p99"])
        if "send_lag_us" in out:
            s["send_lag_p99_us"] = out["send_lag_us"]["p99"]
    else:
        s.update(jobs_per_s=jobs / out["done_s"], submit_per_s=jobs / out["submit_s"])
    return s


class Results:
    def __init__(self):
        self.samples = {}   # (fsync, workers, scenario, system) -> [sample]
        self.failures = {}  # same key -> [message]
        self.ceilings = {}  # (fsync, system) -> {"jobs_per_s", "source", ...}
        self.commands = {}  # system -> summary of its commands per job

    def add(self, key, sample):
        self.samples.setdefault(key, []).append(sample)

    def fail(self, key, message):
        self.failures.setdefault(key, []).append(message)

    def stats(self, key, metric):
        v = [s[metric] for s in self.samples.get(key, ()) if metric in s]
        return (statistics.median(v), min(v), max(v)) if v else None

    def best_throughput(self, fsync, system):
        best = None
        for (f, w, sc, sy) in self.samples:
            if f == fsync and sy == system and sc in ("single", "bulk"):
                m = self.stats((f, w, sc, sy), "jobs_per_s")[0]
                if best is None or m > best[0]:
                    best = (m, f"{sc}, {w} worker process(es)")
        return best

    def as_json(self):
        k = lambda key: "/".join(str(x) for x in key)  # noqa: E731
        return {"samples": {k(key): v for key, v in self.samples.items()},
                "failures": {k(key): v for key, v in self.failures.items()},
                "ceilings": {k(key): v for key, v in self.ceilings.items()},
                "commands": self.commands}


def fmt(x):
    if x >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def table(results, fsync, workers, concurrency, systems, scenarios, unavailable):
    rows = [("scenario", "metric", "system", "median", "min", "max", "vs spool")]
    for scenario in scenarios:
        for metric, (label, higher) in METRICS.items():
            spool = results.stats((fsync, workers, scenario, "spool"), metric)
            for system in systems:
                key = (fsync, workers, scenario, system)
                st = results.stats(key, metric)
                if st is None:
                    continue
                ratio = "-"
                if spool and system != "spool" and st[0] > 0 and spool[0] > 0:
                    ratio = f"{(spool[0] / st[0]) if higher else (st[0] / spool[0]):.2f}x"
                rows.append((scenario, label, system, fmt(st[0]), fmt(st[1]), fmt(st[2]), ratio))
    out = [f"== appendfsync {fsync}, {workers} worker process(es) x concurrency {concurrency} =="]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        out.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths))))
    out.extend(floor_lines(results, fsync, workers, systems))
    for (f, w, sc, sy), msgs in sorted(results.failures.items()):
        if f == fsync and w == workers:
            for m in msgs:
                out.append(f"FAILED {sc} {sy}: {m}")
    for name, why in unavailable.items():
        out.append(f"{name}: {why}")
    return "\n".join(out)


def floor_lines(results, fsync, workers, systems):
    """The floor of single submissions (spool's producer alone, run.py's Run.floor) and how
    far above each peer's single rate it lies: the most any spool could be ahead of that peer
    with a producer that waits for each acknowledgement, on this Redis and this disk."""
    floor = results.stats((fsync, workers, "floor", "spool"), "submit_per_s")
    if floor is None:
        return []
    out = [f"single floor: spool's producer alone, no worker, {fmt(floor[0])} submissions/s "
           f"({fmt(floor[1])}-{fmt(floor[2])})"]
    spool = results.stats((fsync, workers, "single", "spool"), "jobs_per_s")
    if spool:
        out.append(f"  spool's single jobs/s end to end: {spool[0] / floor[0]:.2f} of the floor")
    for system in systems:
        if system.startswith("spool"):
            continue
        peer = results.stats((fsync, workers, "single", system), "jobs_per_s")
        if peer and peer[0] > 0:
            out.append(f"  the floor over {system}'s single jobs/s end to end: "
                       f"{floor[0] / peer[0]:.2f}x")
    return out


def ceiling_table(results, fsync, systems):
    out = [f"== Redis ceiling, appendfsync {fsync}: one job's commands replayed pipelined =="]
    for system in systems:
        c = results.ceilings.get((fsync, system))
        if not c:
            continue
        if "error" in c:
            out.append(f"{system}: {c['error']}")
            continue
        best = results.best_throughput(fsync, system)
        frac = (f"; best end to end {fmt(best[0])} jobs/s ({best[1]}) = "
                f"{best[0] / c['jobs_per_s']:.1%} of it" if best else "")
        errs = (f", {c['errors']} error replies of {c['replies']}, e.g. {c['first_errors'][:1]}"
                if c["errors"] else "")
        out.append(f"{system}: {fmt(c['jobs_per_s'])} jobs/s ({c['source']}{errs}){frac}")
    return "\n".join(out)


def commands_table(results, systems):
    out = ["== Redis commands per job (MONITOR, jobs submitted one at a time, 1 worker process) =="]
    for system in systems:
        c = results.commands.get(system)
        if c:
            out.append(f"{system}: {c['per_job']:.2f} commands + {c['lua_per_job']:.2f} inside "
                       f"scripts; most: {c['common']}")
    return "\n".join(out)
