"""What the console's queue, worker and dashboard pages are tested with: workers alive and dead,
jobs that ran and ended every way, a staff member who may only look."""

import uuid
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import Worker

WORKER = "test-worker"


@pytest.fixture
def workers(settings):
    """host-live (default × 4, reports × 1) and host-silent (default × 1), 31 s without a heartbeat: dead."""
    settings.DL_HEARTBEAT_SEC = 10
    ids = {"live": uuid.uuid4(), "silent": uuid.uuid4()}
    services.worker_register(worker_id=ids["live"], hostname="host-live", pid=1501, queues={"default": 4, "reports": 1})
    services.worker_register(worker_id=ids["silent"], hostname="host-silent", pid=202, queues={"default": 1})
    Worker.objects.filter(worker_id=ids["silent"]).update(heartbeat_at=timezone.now() - timedelta(seconds=31))
    return ids


def live_worker_name(workers) -> str:
    """How host-live names itself in leases and events (``jobs.runtime.names.worker_name``)."""
    return f"host-live:1501:{str(workers['live'])[:8]}"


def ran(queue: str, *kinds: str) -> None:
    """A job of ``queue`` per kind, claimed and ended as that kind (succeeded, fatal, canceled)."""
    for kind in kinds:
        services.job_enqueue(spec=services.JobSpec(queue=queue, task="t", lock_key=uuid.uuid4().hex))
        [claimed] = services.jobs_claim(queue=queue, limit=1, worker_id=WORKER)
        outcome = services.Outcome(lease=claimed.lease, kind=kind, error="boom", duration_ms=100.0)
        services.jobs_complete(outcomes=[outcome], worker_id=WORKER)


def finished(queue: str, status: str, *, at) -> None:
    """A job of ``queue`` that finished ``at`` in ``status``, loaded as such (its INSERT counts it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, status, attempt, started_at, finished_at) "
            "VALUES (gen_random_uuid(), %s, 't', %s, %s, 1, %s, %s)",
            [queue, uuid.uuid4().hex, status, at, at],
        )


def queued(queue: str, count: int = 1) -> list[uuid.UUID]:
    specs = [services.JobSpec(queue=queue, task="t", lock_key=uuid.uuid4().hex) for _ in range(count)]
    return [enqueued.job_id for enqueued in services.job_enqueue_many(specs=specs)]


@pytest.fixture
def viewer(client):
    """A staff member who may look at jobs, queues and workers but not change them."""
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=["view_job", "view_queue", "view_worker"]))
    client.force_login(user)
    return client
