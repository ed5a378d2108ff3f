import threading
import uuid
from contextlib import contextmanager

import pytest

import tests.jobs.handlers  # noqa: F401  (registers the test.* handlers)
from jobs import services
from jobs.models import Job, JobEvent
from jobs.registry import registry
from jobs.worker import WorkerConfig, build_worker
from tests.helpers import wait_for

# Fast clocks for tests: heartbeats, reaper and retries in fractions of a second.
FAST = {
    "heartbeat_sec": 0.2,
    "retry_backoff_sec": 0.05,
    "reaper_period_sec": 0.2,
    "sweep_sec": 60.0,  # long: tests that see jobs picked up quickly prove NOTIFY works
    "shutdown_timeout_sec": 5.0,
}


def enqueue(**fields) -> services.Enqueued:
    fields.setdefault("queue", "default")
    fields.setdefault("lock_key", uuid.uuid4().hex)
    return services.job_enqueue(spec=services.JobSpec(**fields))


def job(job_id) -> Job:
    return Job.objects.get(job_id=job_id)


def kinds(job_id) -> list[str]:
    return list(JobEvent.objects.filter(job_id=job_id).order_by("event_id").values_list("kind", flat=True))


@contextmanager
def running_worker(queues=None, **overrides):
    """A worker runtime running its loop in a thread of the test process, stopped on exit."""
    config = WorkerConfig.from_settings(queues or {"default": 2}, **{**FAST, **overrides})
    worker = build_worker(config, registry)
    thread = threading.Thread(target=worker.run, name="test-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop"


def wait_for_status(job_id, *statuses, timeout=15.0) -> Job:
    return wait_for(
        lambda: (found := job(job_id)).status in statuses and found,
        timeout=timeout,
        what=f"job {job_id} to be {statuses}",
    )


@pytest.fixture
def fast_settings(settings):
    settings.DL_HEARTBEAT_SEC = FAST["heartbeat_sec"]
    return settings
