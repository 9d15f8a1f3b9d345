"""The systems compared and how to start each one's worker and producer commands.

Every system has the same two commands (README.md, "The driver contract"); this table only
says how to launch them. spool's are executables built by CMake, found by --spool-bin DIR
(DIR/worker and DIR/producer) or named one by one with --spool-worker / --spool-producer.
"""

import os
import shutil

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bench/queue
ROOT = os.path.dirname(os.path.dirname(HERE))


class System:
    def __init__(self, name, worker, producer, env=None, missing=None):
        self.name = name
        self.worker_argv = worker        # argv prefix; the contract's options follow
        self.producer_argv = producer
        self.env = dict(os.environ, **(env or {}))
        self.missing = missing           # why it cannot run, or None

    def worker(self, url, queue, concurrency):
        return self.worker_argv + ["--redis", url, "--queue", queue,
                                   "--concurrency", str(concurrency)]

    def producer(self, url, queue, jobs, mode=None, bulk=None, rate=None):
        argv = self.producer_argv + ["--redis", url, "--queue", queue, "--jobs", str(jobs)]
        if rate is not None:
            return argv + ["--rate", f"{rate:g}"]
        return argv + ["--mode", mode] + (["--bulk", str(bulk)] if mode == "bulk" else [])


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def spool(worker, producer):
    """spool, and "spool-claimed": the same drivers with every job claimed by its worker
    (--no-direct), for the path that direct starts bypass, measured in the same run."""
    missing = [p for p in (worker, producer) if not _executable(p)]
    why = f"driver not built ({', '.join(missing)} missing)" if missing else None
    return [System("spool", [worker], [producer], missing=why),
            System("spool-claimed", [worker, "--no-direct"], [producer], missing=why)]


def peers(env_dir):
    python = os.path.join(env_dir, "venv", "bin", "python")
    node_modules = os.path.join(env_dir, "node", "node_modules")
    node = shutil.which("node")
    no_venv = None if _executable(python) else f"no {python} (bench/queue/setup.sh)"
    no_node = (None if node and os.path.isdir(os.path.join(node_modules, "bullmq"))
               else f"no node or no {node_modules}/bullmq (bench/queue/setup.sh)")
    py = lambda name, cmd: [python, os.path.join(HERE, name, cmd)]  # noqa: E731
    js = lambda cmd: [node or "node", os.path.join(HERE, "bullmq", cmd)]  # noqa: E731
    return [
        System("celery", py("celery", "worker.py"), py("celery", "producer.py"), missing=no_venv),
        System("rq", py("rq", "worker.py"), py("rq", "producer.py"), missing=no_venv),
        System("bullmq", js("worker.js"), js("producer.js"), env={"NODE_PATH": node_modules},
               missing=no_node),
    ]


def default_spool_bin():
    # Under bench/ab/ab.sh, the revision's build ($AB_BUILD).
    build = os.environ.get("AB_BUILD") or os.path.join(ROOT, "build", "release")
    return os.path.join(build, "bench", "queue", "spool")


def default_env_dir():
    return os.path.join(ROOT, "build", "bench-queue")
