"""The statement-level NOTIFY triggers (seed semantics, one notification per queue per statement)."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import NOTIFY_CHANNEL, Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening

pytestmark = ALL_DATABASES_COMMITTED


@pytest.fixture
def listener():
    with listening("default", NOTIFY_CHANNEL) as received:
        yield received


def spec(queue: str, **fields) -> services.JobSpec:
    return services.JobSpec(queue=queue, task="test.echo", lock_key=uuid.uuid4().hex, **fields)


def test_a_bulk_insert_notifies_once_per_queue(listener):
    services.job_enqueue_many(specs=[spec("a") for _ in range(300)] + [spec("b") for _ in range(200)])

    assert listener() == ["a", "b"]


def test_insert_notifies_like_the_seed_even_for_future_jobs(listener):
    services.job_enqueue(spec=spec("later", available_at=timezone.now() + timedelta(hours=1)))

    assert listener() == ["later"]


def test_update_notifies_when_jobs_become_available(listener):
    services.job_enqueue_many(specs=[spec("q", available_at=timezone.now() + timedelta(hours=1)) for _ in range(5)])
    listener()

    Job.objects.update(available_at=timezone.now() - timedelta(seconds=1))

    assert listener() == ["q"]


def test_updates_that_do_not_make_jobs_available_are_silent(listener):
    enqueued = services.job_enqueue(spec=spec("q"))
    listener()

    Job.objects.filter(job_id=enqueued.job_id).update(progress={"x": 1})  # neither status nor available_at
    Job.objects.filter(job_id=enqueued.job_id).update(available_at=timezone.now() + timedelta(hours=1))  # not yet
    Job.objects.filter(job_id=enqueued.job_id).update(status="running")  # not queued

    assert listener() == []


def test_requeue_notifies(listener):
    enqueued = services.job_enqueue(spec=spec("q"))
    Job.objects.filter(job_id=enqueued.job_id).update(status="running")
    listener()

    Job.objects.filter(job_id=enqueued.job_id).update(status="queued")

    assert listener() == ["q"]
