import uuid
from contextlib import contextmanager

import pytest

import tests.jobs.handlers  # noqa: F401  (registers the test.* handlers)
from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from jobs.runtime.config import WorkerConfig
from tests.helpers import wait_for
from tests.jobs.helpers import FAST, worker_in_thread


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
    """A worker runtime serving ``queues`` in a thread of the test process, stopped on exit."""
    with worker_in_thread(
        WorkerConfig.from_settings({"queue": queues or {"default": 2}}, **{**FAST, **overrides})
    ) as worker:
        yield worker


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
