"""RQ worker of the queue benchmark (contract: bench/queue/README.md).

    worker.py --redis URL --queue Q --concurrency C

RQ runs one job at a time per worker, so concurrency C is RQ's worker pool (`rq worker-pool`,
the WorkerPool class) of C worker processes: one contract worker process is the pool's
process and its C children. The workers are SimpleWorker, which runs each job in the worker
process itself; RQ's default Worker forks a child for every job (isolation at the cost of a
fork per job), which no empty job needs. Logging at WARNING: RQ logs two lines per job at INFO.
Prints `ready` once C workers of this pool have registered in Redis (RQ's worker registry),
that is, once they are about to dequeue. SIGTERM: WorkerPool stops its workers warmly (each
finishes its job).
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contract  # noqa: E402
from redis import Redis  # noqa: E402
from rq import Queue, SimpleWorker, Worker  # noqa: E402
from rq.worker_pool import WorkerPool  # noqa: E402

READY_POLL_S = 0.02  # polling RQ's registry for the workers' registration
READY_LIMIT_S = 60


class AnnouncingPool(WorkerPool):
    """A WorkerPool that says `ready` once its first workers are registered."""

    def start_workers(self, *args, **kwargs):
        super().start_workers(*args, **kwargs)
        # Started only after the fork of every worker, so that no child inherits its state.
        threading.Thread(target=self._announce_when_registered, daemon=True).start()

    def _announce_when_registered(self):
        connection = Redis(connection_pool=self.connection.connection_pool)
        queue = Queue(self._queue_names[0], connection=connection)
        deadline = time.monotonic() + READY_LIMIT_S
        names = set(self.worker_dict)
        while not names <= {w.name for w in Worker.all(queue=queue)}:
            if time.monotonic() > deadline:
                print("worker: the pool's workers did not register", file=sys.stderr)
                os._exit(1)
            time.sleep(READY_POLL_S)
        contract.announce_ready()


def main():
    a = contract.worker_args(__doc__.splitlines()[0])
    pool = AnnouncingPool([a.queue], connection=Redis.from_url(a.redis),
                          num_workers=a.concurrency, worker_class=SimpleWorker)
    pool.start(logging_level="WARNING")


if __name__ == "__main__":
    main()
