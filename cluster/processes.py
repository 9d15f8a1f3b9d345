"""The fleet's background processes, each tracked by a pid file in the fleet's state directory.

A process runs in a session of its own with its output in a log file, and outlives the program
that started it. Its pid file holds the pid and the process's start time, so that a reused pid
is never taken for ours: a later run stops exactly the processes it started and nothing else.
"""

import os
import shutil
import signal
import subprocess
import time

import wire


class FleetError(Exception):
    """A part did not start, stop or reach the state asked for in time; the message says which
    and where its log is."""


def wait_for(predicate, timeout, what, interval=0.05):
    """wire.wait_for for the fleet: a FleetError (a part that exited, say) counts as not yet,
    like OSError and RespError, and the deadline raises FleetError."""
    return wire.wait_for(predicate, timeout, what, interval,
                         errors=(OSError, wire.RespError, FleetError), failure=FleetError)


def tail(path, lines=20):
    """The last `lines` lines of a log file ("" if it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return b"".join(f.readlines()[-lines:]).decode(errors="replace")
    except OSError:
        return ""


def find_program(program):
    """The path of an installed program (PATH, else /usr/bin); FleetError if it is missing."""
    path = shutil.which(program) or f"/usr/bin/{program}"
    if not os.access(path, os.X_OK):
        raise FleetError(f"{program} is not installed: run scripts/install-deps.sh")
    return path


def _start_time(pid):
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: split after the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":  # exited, not yet reaped: as good as gone
        return None
    return int(fields[19])


class Process:
    """One background process of the fleet, tracked by its pid file."""

    def __init__(self, name, state_dir):
        self.name = name
        self.pidfile = os.path.join(state_dir, "pids", f"{name}.pid")
        self.log = os.path.join(state_dir, "logs", f"{name}.log")
        self.popen = None  # set when this Python process started it (reaped on exit)

    def start(self, cmd, cwd, ns=""):
        """Starts `cmd`, inside network namespace `ns` if one is named (`ip netns exec`
        replaces itself with the command: the pid is the command's)."""
        if self.pid() is not None:
            raise FleetError(f"{self.name} is already running (pid {self.pid()})")
        if ns:
            cmd = ["ip", "netns", "exec", ns, *cmd]
        with open(self.log, "ab") as log:
            log.write(f"==> {time.strftime('%F %T')} {' '.join(cmd)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True)
        started = _start_time(self.popen.pid)
        with open(self.pidfile + ".tmp", "w") as f:
            f.write(f"{self.popen.pid} {started}\n")
        os.replace(self.pidfile + ".tmp", self.pidfile)

    def pid(self):
        """The pid if our process still runs, else None (a stale pid file is removed)."""
        try:
            with open(self.pidfile) as f:
                pid, started = f.read().split()
            pid = int(pid)
        except (OSError, ValueError):
            return None
        if self.popen is not None and self.popen.pid == pid and self.popen.poll() is not None:
            alive = False
        else:
            alive = str(_start_time(pid)) == started
        if not alive:
            try:
                os.unlink(self.pidfile)
            except FileNotFoundError:
                pass
            return None
        return pid

    def send(self, sig):
        pid = self.pid()
        if pid is None:
            raise FleetError(f"{self.name} is not running")
        os.kill(pid, sig)

    def wait_exit(self, timeout):
        wait_for(lambda: self.pid() is None, timeout, f"{self.name} to exit (log: {self.log})")

    def stop(self, timeout, sig=signal.SIGTERM):
        """sig, then SIGKILL if it has not exited within `timeout` s. True if it was running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        os.kill(pid, sig)
        try:
            self.wait_exit(timeout)
        except FleetError:
            if self.pid() is not None:
                os.kill(pid, signal.SIGKILL)
                self.wait_exit(10)
        return True

    def kill(self):
        """SIGKILL, and waits for the exit."""
        self.send(signal.SIGKILL)
        self.wait_exit(10)

    def check_running(self):
        """Raises FleetError, with the end of the log, if the process has exited."""
        if self.pid() is None:
            raise FleetError(f"{self.name} exited; its log {self.log} ends:\n{tail(self.log)}")


class Processes:
    """The fleet's processes by name, all with their pid files and logs in one state
    directory."""

    def __init__(self, state_dir):
        self.dir = state_dir
        self._by_name = {}

    def __getitem__(self, name):
        if name not in self._by_name:
            self._by_name[name] = Process(name, self.dir)
        return self._by_name[name]

    def running(self, names):
        """Those of `names` whose process runs now."""
        return [name for name in names if self[name].pid() is not None]
