"""RQ producer of the queue benchmark (contract: bench/queue/README.md).

    producer.py --redis URL --queue Q --jobs N (--mode single|bulk [--bulk B] | --rate R)

single: Queue.enqueue per job. bulk: Queue.enqueue_many of B Queue.prepare_data per batch,
one pipeline (one round trip) a batch. Results: RQ keeps each job's results in a stream of its
own (rq:results:<id>; Job.latest_result(timeout) blocks on it with XREAD). A thread does that
XREAD for the oldest WINDOW unfinished jobs at once, so that results arriving out of order are
each seen when they come, and RQ's Result.restore reads them.
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contract  # noqa: E402
from redis import Redis  # noqa: E402
from rq import Queue  # noqa: E402
from rq.results import Result  # noqa: E402
from tasks import noop  # noqa: E402

WINDOW = 64
BLOCK_MS = 200


class ResultReader:
    """Reads the results of the submitted jobs as RQ's workers write them."""

    def __init__(self, redis_url, outcomes):
        self.redis = Redis.from_url(redis_url)
        self.outcomes = outcomes
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            pending = self.outcomes.oldest_pending(WINDOW)
            if not pending:
                time.sleep(0.001)  # nothing submitted yet: the producer is about to
                continue
            streams = {Result.get_key(j): "0-0" for j in pending}
            for key, entries in self.redis.xread(streams, block=BLOCK_MS) or ():
                seen_ns = time.time_ns()
                job_id = key.decode().rsplit(":", 1)[1]
                result_id, payload = entries[-1]
                r = Result.restore(job_id, result_id.decode(), payload, connection=self.redis)
                if r.type == Result.Type.SUCCESSFUL:
                    try:
                        self.outcomes.seen(job_id, True, contract.parse_start_ns(r.return_value),
                                           seen_ns)
                    except ValueError as e:
                        self.outcomes.seen(job_id, False, str(e), seen_ns)
                else:
                    self.outcomes.seen(job_id, False, f"{r.type.name}: {r.exc_string}", seen_ns)

    def stop(self):
        self.stopping.set()
        self.thread.join()


def main():
    a = contract.producer_args(__doc__.splitlines()[0])
    queue = Queue(a.queue, connection=Redis.from_url(a.redis))
    outcomes = contract.Outcomes()
    reader = ResultReader(a.redis, outcomes)

    def submit_one(ns):
        return queue.enqueue(noop, ns).id

    def submit_batch(batch):
        return [j.id for j in queue.enqueue_many([Queue.prepare_data(noop, (ns,)) for ns in batch])]

    def wait():
        outcomes.wait_all(a.jobs, a.timeout)

    if a.mode:
        contract.run_throughput(a, outcomes, submit_one, submit_batch, wait)
    else:
        contract.run_rate(a, outcomes, submit_one, wait)
    reader.stop()


if __name__ == "__main__":
    main()
