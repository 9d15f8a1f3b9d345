"""Celery producer of the queue benchmark (contract: bench/queue/README.md).

    producer.py --redis URL --queue Q --jobs N (--mode single|bulk [--bulk B] | --rate R)

single: noop.apply_async() per job. bulk: a group of B signatures per batch, group().
apply_async() (Celery has no one-round-trip bulk submit: a group sends its B messages one after
another on one connection). Results: in single and bulk, ResultSet.join_native, Celery's
pub/sub wait on the Redis backend, after the last submit; at --rate, a thread subscribed to the
backend's result channels (celery-task-meta-*) timestamps each result as it is published,
since join_native cannot run while the same thread keeps the schedule.
"""

import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contract  # noqa: E402
import redis  # noqa: E402
from celery import group  # noqa: E402
from celery.result import ResultSet  # noqa: E402
from tasks import make_app  # noqa: E402

CHANNEL_PREFIX = "celery-task-meta-"


def record(outcomes, task_id, ok, value, seen_ns=None):
    if ok:
        try:
            value = contract.parse_start_ns(value)
        except ValueError as e:
            ok, value = False, str(e)
    outcomes.seen(task_id, ok, value if ok else repr(value), seen_ns)


class ChannelListener:
    """Every result Celery's Redis backend publishes, with the time it arrived here."""

    def __init__(self, redis_url, outcomes):
        self.outcomes = outcomes
        self.pubsub = redis.Redis.from_url(redis_url).pubsub(ignore_subscribe_messages=True)
        self.pubsub.psubscribe(CHANNEL_PREFIX + "*")
        self.pubsub.get_message(timeout=5)  # the psubscribe confirmation: listening from here
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping.is_set():
            m = self.pubsub.get_message(timeout=0.2)
            if m is None or m["type"] != "pmessage":
                continue
            seen_ns = time.time_ns()
            meta = json.loads(m["data"])
            task_id = m["channel"].decode()[len(CHANNEL_PREFIX):]
            if meta.get("status") == "SUCCESS":
                record(self.outcomes, task_id, True, meta.get("result"), seen_ns)
            elif meta.get("status") in ("FAILURE", "REVOKED", "REJECTED"):
                record(self.outcomes, task_id, False, meta.get("result"), seen_ns)

    def stop(self):
        self.stopping.set()
        self.thread.join()


def main():
    a = contract.producer_args(__doc__.splitlines()[0])
    app, noop = make_app(a.redis, a.queue)
    outcomes = contract.Outcomes()
    results = []

    def submit_one(ns):
        r = noop.apply_async(args=(ns,))
        results.append(r)
        return r.id

    def submit_batch(batch):
        g = group(noop.s(ns) for ns in batch).apply_async()
        results.extend(g.results)
        return [r.id for r in g.results]

    def join():
        def on_result(task_id, value):
            ok = not isinstance(value, BaseException)
            record(outcomes, task_id, ok, value)
        try:
            ResultSet(results).join_native(timeout=a.timeout, propagate=False, callback=on_result)
        except TimeoutError:
            pass  # wait_all names what is missing
        outcomes.wait_all(a.jobs, 0)

    if a.mode:
        contract.run_throughput(a, outcomes, submit_one, submit_batch, join)
    else:
        listener = ChannelListener(a.redis, outcomes)
        contract.run_rate(a, outcomes, submit_one, lambda: outcomes.wait_all(a.jobs, a.timeout))
        listener.stop()


if __name__ == "__main__":
    main()
