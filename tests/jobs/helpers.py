"""Helpers shared by the jobs tests."""

import threading
import uuid
from contextlib import contextmanager

from jobs.queue.handlers import registry
from jobs.runtime.build import build_worker
from jobs.runtime.config import WorkerConfig
from tests.db_helpers import raw_connection

# Fast clocks for tests: heartbeats, reaper and retries in fractions of a second.
FAST = {
    "heartbeat_sec": 0.2,
    "retry_backoff_sec": 0.05,
    "reaper_period_sec": 0.2,
    "sweep_sec": 60.0,  # long: tests that see jobs picked up quickly prove NOTIFY works
    "shutdown_timeout_sec": 5.0,
}


@contextmanager
def worker_in_thread(config: WorkerConfig):
    """The runworker runtime for ``config``, its loop in a thread of the test process, stopped on exit."""
    worker = build_worker(config, registry)
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop"


def insert_unclaimable(queue="default") -> uuid.UUID:
    """A job no claim can take, written the way only a direct INSERT (an older version, a script) could:
    its attempt counter is at the integer limit, so the claim's ``attempt + 1`` is out of range."""
    job_id = uuid.uuid4()
    with raw_connection("default", autocommit=True) as conn:
        conn.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, priority, attempt, max_attempts) "
            "VALUES (%s, %s, 't', %s, 0, 2147483647, 2147483647)",
            [job_id, queue, f"unclaimable-{job_id}"],
        )
    return job_id
