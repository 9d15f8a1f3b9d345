"""Celery worker of the queue benchmark (contract: bench/queue/README.md).

    worker.py --redis URL --queue Q --concurrency C

One `celery worker` with the prefork pool of C processes consuming Q; settings in tasks.py.
Prints `ready` when Celery signals worker_ready (the pool is up and consuming). SIGTERM is
Celery's warm shutdown: prefetched tasks go back to the queue, running ones finish.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contract  # noqa: E402
from celery.signals import worker_ready  # noqa: E402
from tasks import make_app  # noqa: E402


def main():
    a = contract.worker_args(__doc__.splitlines()[0])
    app, _ = make_app(a.redis, a.queue)
    worker_ready.connect(lambda **_: contract.announce_ready(), weak=False)
    app.worker_main(["--quiet", "worker", "--queues", a.queue, "--concurrency", str(a.concurrency),
                     "--pool", "prefork", "--loglevel", "WARNING", "--without-gossip",
                     "--without-mingle", "--without-heartbeat"])


if __name__ == "__main__":
    main()
