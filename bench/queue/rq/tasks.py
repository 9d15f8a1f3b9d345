"""The benchmark's one RQ task; RQ finds it by its import path, tasks.noop."""

import time


def noop(submit_ns):
    return str(time.time_ns())
