"""The worker processes of one system and one producer run, as the contract defines them.

Each command writes to files in the run's directory (its stdout is polled for `ready`), so
that nothing it prints can fill a pipe and stall it. Each worker runs in a session of its own:
SIGTERM goes to the worker command alone, as the contract says; whatever of its process group
is left after it exits (or after STOP_LIMIT_S) is killed.
"""

import json
import os
import resource
import signal
import subprocess
import time

READY_LIMIT_S = 60
STOP_LIMIT_S = 30


class CommandFailed(Exception):
    pass


def _tail(path, lines=5):
    try:
        with open(path, errors="replace") as f:
            return " | ".join(f.read().strip().splitlines()[-lines:])
    except OSError:
        return ""


class Workers:
    """`count` worker commands of one system, started together and ready on return."""

    def __init__(self, system, url, queue, count, concurrency, log_dir, tag):
        self.procs = []
        try:
            for i in range(count):
                out = os.path.join(log_dir, f"{tag}-worker{i}.out")
                err = os.path.join(log_dir, f"{tag}-worker{i}.err")
                with open(out, "wb") as o, open(err, "wb") as e:
                    p = subprocess.Popen(system.worker(url, queue, concurrency), stdout=o,
                                         stderr=e, stdin=subprocess.DEVNULL, env=system.env,
                                         start_new_session=True)
                self.procs.append((p, out, err))
            for p, out, err in self.procs:
                self._wait_ready(p, out, err)
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _wait_ready(p, out, err):
        deadline = time.monotonic() + READY_LIMIT_S
        while time.monotonic() < deadline:
            with open(out, "rb") as f:
                if b"ready\n" in f.read().splitlines(keepends=True):
                    return
            if p.poll() is not None:
                raise CommandFailed(f"worker exited with {p.returncode}: {_tail(err)}")
            time.sleep(0.01)  # polling for its `ready` line, bounded by READY_LIMIT_S
        raise CommandFailed(f"worker not ready after {READY_LIMIT_S} s: {_tail(err)}")

    @property
    def pids(self):
        return [p.pid for p, _, _ in self.procs]

    def check_alive(self):
        for p, _, err in self.procs:
            if p.poll() is not None:
                raise CommandFailed(f"a worker exited with {p.returncode}: {_tail(err)}")

    def stop(self):
        """SIGTERM to each worker command, then the rest of its process group killed."""
        for p, _, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_LIMIT_S
        for p, _, _ in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            try:
                os.killpg(p.pid, signal.SIGKILL)  # its group: this worker's own session
            except ProcessLookupError:
                pass
            p.wait()
        self.procs = []


def run_producer(system, argv, log_dir, tag, limit_s):
    """Runs one producer to its end; returns (its JSON line, its CPU seconds)."""
    out = os.path.join(log_dir, f"{tag}-producer.out")
    err = os.path.join(log_dir, f"{tag}-producer.err")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out, "wb") as o, open(err, "wb") as e:
        p = subprocess.Popen(argv, stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=system.env,
                             start_new_session=True)
    try:
        p.wait(limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise CommandFailed(f"producer still running after {limit_s:g} s: {_tail(err)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise CommandFailed(f"producer exited with {p.returncode}: {_tail(err)}")
    with open(out) as f:
        lines = [l for l in f.read().splitlines() if l.startswith("{")]
    if not lines:
        raise CommandFailed(f"producer printed no JSON line: {_tail(out)} {_tail(err)}")
    return json.loads(lines[-1]), cpu
