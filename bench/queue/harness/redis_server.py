"""One redis-server of the run: Debian's, on a free loopback port, in a directory of its own.

The append-only file is on, with no RDB snapshots and no automatic AOF rewrite (a rewrite that
fell inside one system's measurement would charge that system alone); `appendfsync` is set per
pass. The directory should be on a disk: on tmpfs an fsync costs nothing.
"""

import os
import shutil
import subprocess
import time

import wire  # cluster/wire.py (run.py puts cluster/ on the path)

START_LIMIT_S = 20
STOP_LIMIT_S = 30


def fsync_ms(directory, count=100):
    """p50 and p99 of one small append plus fsync in directory, in ms: what every write that
    Redis acknowledges under appendfsync always waits for, at the least."""
    path = os.path.join(directory, "fsync-probe")
    times = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for _ in range(count):
            t0 = time.monotonic()
            os.write(fd, b"x" * 100)
            os.fsync(fd)
            times.append((time.monotonic() - t0) * 1e3)
    finally:
        os.close(fd)
        os.unlink(path)
    times.sort()
    return times[len(times) // 2], times[int(len(times) * 0.99) - 1]


def filesystem_of(path):
    """The type of the filesystem holding path (from /proc/mounts, longest mount point)."""
    path, best = os.path.realpath(path), ("", "?")
    with open("/proc/mounts") as f:
        for line in f:
            _, mnt, fstype = line.split()[:3]
            if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best[0]):
                best = (mnt, fstype)
    return best[1]


class RedisServer:
    def __init__(self, directory, binary="redis-server"):
        self.directory = directory
        self.log = os.path.join(directory, "redis.log")
        self.process = None
        for _ in range(5):  # the port was free a moment ago; another run may have taken it
            self.port = wire.free_port()
            if self._start(binary):
                break
        else:
            raise RuntimeError(f"redis-server did not start; see {self.log}")
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.conn = wire.Connection(self.port)
        self.version = self.info("server")["redis_version"]

    def _start(self, binary):
        argv = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.directory,
                "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                "--auto-aof-rewrite-percentage", "0", "--daemonize", "no",
                "--logfile", self.log]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + START_LIMIT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if wire.redis_command("127.0.0.1", self.port, "PING", timeout=1) == "PONG":
                    return True
            except (OSError, wire.RespError):
                pass  # not listening yet, or still loading
            time.sleep(0.02)  # polling the server's first answer, bounded by START_LIMIT_S
        self.process.kill()
        self.process.wait()
        return False

    @property
    def pid(self):
        return self.process.pid

    def command(self, *args):
        try:
            return self.conn.command(*args)
        except (OSError, wire.RespError) as e:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited during the run (status "
                                   f"{self.process.returncode}; {self.log} says why)") from e
            raise

    def info(self, section):
        return wire.info_fields(self.command("INFO", section).decode())

    def command_seconds(self):
        """Seconds redis-server spent running commands since CONFIG RESETSTAT (INFO
        commandstats): its CPU less the reading, writing, fsync and idle work around them."""
        stats = self.info("commandstats").values()
        return sum(int(v.split("usec=", 1)[1].split(",", 1)[0]) for v in stats) / 1e6

    def set_fsync(self, mode):
        self.command("CONFIG", "SET", "appendfsync", mode)

    def flush(self):
        """Every key gone; the script cache stays (FLUSHALL leaves it)."""
        self.command("FLUSHALL")

    def stop(self):
        if self.process is None or self.process.poll() is not None:
            return
        try:
            self.conn.close()
        except OSError:
            pass
        self.process.terminate()
        try:
            self.process.wait(STOP_LIMIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def binary_path(name):
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"{name} not found (Debian: apt-get install redis-server redis-tools)")
    return found
