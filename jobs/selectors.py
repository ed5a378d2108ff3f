"""Reads of the job queue."""

import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection
from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.utils import timezone

from jobs.models import FINISHED_STATUSES, Job, JobEvent, JobStatus, Worker
from pipeline_project.core.errors import NotFoundError


def job_get(*, job_id: uuid.UUID) -> Job:
    job = Job.objects.filter(job_id=job_id).first()
    if job is None:
        raise NotFoundError(f"No job {job_id}.", details={"job_id": str(job_id)})
    return job


def job_list():
    """All jobs, newest first (job ids are time-ordered); the API filters and paginates this."""
    return Job.objects.order_by("-job_id")


def job_events(*, job_id: uuid.UUID, after: int = 0, limit: int = 1000) -> list[JobEvent]:
    return list(JobEvent.objects.filter(job_id=job_id, event_id__gt=after).order_by("event_id")[:limit])


def job_status(*, job_id: uuid.UUID) -> str | None:
    return Job.objects.filter(job_id=job_id).values_list("status", flat=True).first()


def next_available_at(*, queues: list[str]) -> datetime | None:
    """When the earliest not-yet-available queued job of these queues becomes available.

    Reads the seed's ix_dl_jobs_claim index (queue, available_at) once per queue.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT min(soonest) FROM unnest(%s::text[]) AS q(name), LATERAL (
                SELECT available_at AS soonest FROM dl_jobs
                WHERE status = 'queued' AND queue = q.name AND available_at > now()
                ORDER BY available_at LIMIT 1
            ) AS next_job
            """,
            [queues],
        )
        return cursor.fetchone()[0]


def queue_depths() -> dict[str, dict[str, int]]:
    """``{queue: {status: count}}`` for every queue and status present."""
    depths: dict[str, dict[str, int]] = {}
    for row in Job.objects.values("queue", "status").annotate(count=Count("job_id")).order_by("queue", "status"):
        depths.setdefault(row["queue"], {})[row["status"]] = row["count"]
    return depths


def live_worker_cutoff() -> datetime:
    """A worker is live if it heartbeated after this: within three heartbeat periods."""
    return timezone.now() - timedelta(seconds=3 * settings.DL_HEARTBEAT_SEC)


def live_workers() -> list[Worker]:
    return list(Worker.objects.filter(heartbeat_at__gte=live_worker_cutoff()))


def throughput(*, minutes: int = 60) -> list[dict]:
    """Jobs finished per minute over the last ``minutes``: succeeded, and failed (failed, canceled or lost)."""
    since = timezone.now() - timedelta(minutes=minutes)
    return list(
        Job.objects.filter(finished_at__gte=since)
        .annotate(minute=TruncMinute("finished_at"))
        .values("minute")
        .annotate(
            succeeded=Count("job_id", filter=Q(status=JobStatus.SUCCEEDED)),
            failed=Count("job_id", filter=Q(status__in=[s for s in FINISHED_STATUSES if s != JobStatus.SUCCEEDED])),
        )
        .order_by("minute")
    )


def status_section() -> tuple[str, dict]:
    """The jobs part of /status: live workers and queue depths."""
    workers = [
        {
            "worker_id": str(worker.worker_id),
            "hostname": worker.hostname,
            "pid": worker.pid,
            "queues": worker.queues,
            "running_jobs": worker.running_jobs,
            "started_at": worker.started_at,
            "heartbeat_at": worker.heartbeat_at,
        }
        for worker in live_workers()
    ]
    return "jobs", {"workers": workers, "queues": queue_depths()}
