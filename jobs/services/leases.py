"""Leases: what a worker holds on its running jobs, renewing them, writing progress, giving jobs back.

Writes to a running job are guarded by its lease: ``status = 'running'`` and the
(attempt, started_at) pair the worker got at claim time. A worker whose lease expired and
was reaped (the job was requeued and claimed again, attempt + 1), released (started_at
cleared) or reset by an operator matches nothing and cannot overwrite the job.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import datetime

from pipeline_project.core import sql


@dataclass(frozen=True)
class Lease:
    """What a worker holds on a running job; every write it makes is guarded by it."""

    job_id: uuid.UUID
    attempt: int
    started_at: datetime


def lease_params(leases: list[Lease]) -> dict:
    """The leases as the arrays ``MY_LEASES`` unnests."""
    return {
        "job_ids": [lease.job_id for lease in leases],
        "attempts": [lease.attempt for lease in leases],
        "started": [lease.started_at for lease in leases],
    }


MY_LEASES = """
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(attempts)s::int[], %(started)s::timestamptz[]) AS mine(job_id, attempt, started_at)
"""
# The lease guard. ``j.job_id = ANY(...)`` keeps the plan on the primary key whatever the
# planner guesses about the unnested leases.
LEASE_GUARD = (
    "j.job_id = ANY (%(job_ids)s::uuid[]) AND j.job_id = mine.job_id AND j.status = 'running' "
    "AND j.attempt = mine.attempt AND j.started_at = mine.started_at"
)


def jobs_heartbeat(*, leases: list[Lease], worker_id: str) -> dict[uuid.UUID, bool]:
    """Renew every lease a worker holds in one statement.

    Returns ``{job_id: cancel_requested}`` for the leases still held; a job missing from
    the answer was reaped, deleted or reset, and its run must stop.
    """
    if not leases:
        return {}
    rows = sql.rows(
        f"""
        WITH mine AS ({MY_LEASES}),
        renewed AS (
            UPDATE dl_jobs j
            SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
            FROM mine WHERE {LEASE_GUARD}
            RETURNING j.job_id, j.queue, j.cancel_requested
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'heartbeat', jsonb_build_object('worker', %(worker)s::text) FROM renewed
        )
        SELECT job_id, cancel_requested FROM renewed
        """,
        {**lease_params(leases), "worker": worker_id},
    )
    return dict(rows)


def job_progress(*, lease: Lease, progress: dict) -> bool | None:
    """Store a running job's progress; return its cancel_requested flag, or None if the lease is gone."""
    rows = sql.rows(
        f"""
        WITH mine AS ({MY_LEASES})
        UPDATE dl_jobs j SET progress = %(progress)s::jsonb FROM mine WHERE {LEASE_GUARD}
        RETURNING j.cancel_requested
        """,
        {**lease_params([lease]), "progress": json.dumps(progress)},
    )
    return rows[0][0] if rows else None


def jobs_release(*, leases: list[Lease], worker_id: str) -> int:
    """Give running jobs back to their queue now (a worker shutting down); return how many.

    The run was the worker's to stop, not the job's to fail: its attempt is given back. Its
    started_at is cleared too, so the next claim's lease (attempt, started_at) differs from
    this one and a straggling write under the old lease still matches nothing.
    """
    if not leases:
        return 0
    rows = sql.rows(
        f"""
        WITH mine AS ({MY_LEASES}),
        released AS (
            UPDATE dl_jobs j
            SET status = 'queued', attempt = j.attempt - 1, started_at = NULL, available_at = now(),
                lease_expires_at = NULL
            FROM mine WHERE {LEASE_GUARD}
            RETURNING j.job_id, j.queue, j.attempt
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'requeue',
                   jsonb_build_object('reason', 'worker_shutdown', 'worker', %(worker)s::text, 'attempt_returned', attempt + 1)
            FROM released
        )
        SELECT count(*) FROM released
        """,
        {**lease_params(leases), "worker": worker_id},
    )
    return rows[0][0]
