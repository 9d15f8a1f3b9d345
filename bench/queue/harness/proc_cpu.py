"""CPU time of process trees from /proc/PID/stat: utime+stime of every thread of a process
(the process's line sums its threads) plus cutime+cstime, the time of children it has reaped,
so that a child that exits between two readings stays counted once."""

import os

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _stat(pid):
    """(ppid, utime+stime+cutime+cstime in ticks), or None once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    # fields[0] is field 3 of proc(5): ppid is field 4, utime..cstime are fields 14..17.
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def tree_seconds(roots):
    """CPU seconds of the processes `roots` and all their live descendants, together."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = _stat(int(name))
            if s:
                stats[int(name)] = s
    children = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo, seen = 0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total / TICKS_PER_S
