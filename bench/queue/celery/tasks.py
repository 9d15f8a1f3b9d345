"""The Celery app of the benchmark: Redis as broker and result backend, one task `noop`.

Settings, each Celery's own advice for many short tasks where it gives one:
- prefork pool (Celery's default) with --concurrency C child processes: one contract worker
  process is one `celery worker` command, its main process and its C children;
- worker_prefetch_multiplier 64 (default 4): Celery's optimizing guide says to raise it for
  many short tasks, since each child otherwise waits for the broker between tasks;
- task_acks_late False (the default): the message is acknowledged when the worker receives it,
  before the task runs; late acks are Celery's opt-in for idempotent tasks, at extra cost;
- no task events, no STARTED state (task_track_started False), JSON serialisation (defaults);
- --without-gossip --without-mingle --without-heartbeat: no periodic broadcast between
  workers through the broker (nothing per job; less background traffic on the one Redis).
"""

import time

from celery import Celery

PREFETCH_MULTIPLIER = 64


def make_app(redis_url, queue):
    app = Celery("spool-queue-bench", broker=redis_url, backend=redis_url)
    app.conf.update(
        task_default_queue=queue,
        worker_prefetch_multiplier=PREFETCH_MULTIPLIER,
        task_acks_late=False,
        task_track_started=False,
        worker_send_task_events=False,
        worker_redirect_stdouts=False,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )

    @app.task(name="noop")
    def noop(submit_ns):
        return str(time.time_ns())

    return app, noop
