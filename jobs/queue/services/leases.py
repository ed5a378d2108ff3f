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

from jobs.queue.states import QUEUED_SQL, RUNNING_SQL
from pipeline_project.db import sql


@dataclass(frozen=True)
class Lease:
    """What a worker holds on a running job; every write it makes is guarded by it."""

    job_id: uuid.UUID
    attempt: int
    started_at: datetime


# Most leases one statement writes: a worker that fell behind by 10,000 results writes them in
# short statements, its heartbeats and claims going on between them.
LEASE_BATCH = 256


def in_batches[T](items: list[T]) -> list[list[T]]:
    """``items`` in lists of at most LEASE_BATCH, for one statement each."""
    return [items[start : start + LEASE_BATCH] for start in range(0, len(items), LEASE_BATCH)]


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
# A statement's rows, locked first and in job_id order: a worker's heartbeat and its recorder
# write overlapping jobs from two connections, and rows locked in two orders deadlock.
LOCKED_IN_ORDER = """
    SELECT job_id FROM dl_jobs WHERE job_id = ANY (%(job_ids)s::uuid[]) ORDER BY job_id FOR NO KEY UPDATE
"""
# A job ``j`` under a lease of ``mine``. ``status::text``, a condition no index serves, keeps the
# plan off the indexes of running jobs: a bitmap scan of their 'running' entries reads one per
# job claimed since the last vacuum (a bitmap scan marks none dead), and at 1,000 jobs/s a
# worker's heartbeat came to take 30 s, holding its results and claims behind it.
LEASE_MATCH = (
    f"j.job_id = mine.job_id AND j.status::text = {RUNNING_SQL} AND j.attempt = mine.attempt "
    "AND j.started_at = mine.started_at"
)
# The lease guard of a statement on a few leases: ``j.job_id = ANY(...)`` keeps the plan on the
# primary key whatever the planner guesses about the unnested leases.
LEASE_GUARD = f"j.job_id = ANY (%(job_ids)s::uuid[]) AND {LEASE_MATCH}"


def locked_leases(leases: str) -> str:
    """The CTEs ``locked`` (the leases' rows, locked in order) and ``mine`` (``leases``, a query of
    rows with job_id, attempt and started_at, less those whose row is gone), for a statement that
    then writes ``dl_jobs j`` ``FROM mine WHERE LEASE_MATCH``.

    Materialized, ``mine`` drives that join: one primary-key probe per lease. Joined through
    LEASE_GUARD's ``ANY`` instead, the plan (generic, made for a few leases) walked the rows and
    read every lease for each: the work grew as their product, 156 µs of PostgreSQL's CPU per
    result at 164 results a statement, against 83 so.
    """
    return f"""
    locked AS MATERIALIZED ({LOCKED_IN_ORDER}),
    mine AS MATERIALIZED (SELECT m.* FROM ({leases}) AS m WHERE m.job_id IN (SELECT job_id FROM locked))
    """


def jobs_heartbeat(*, leases: list[Lease], worker_id: str) -> dict[uuid.UUID, bool]:
    """Renew every lease a worker holds, in one statement per LEASE_BATCH.

    Returns ``{job_id: cancel_requested}`` for the leases still held; a job missing from
    the answer was reaped, deleted or reset, and its run must stop.
    """
    held = {}
    for batch in in_batches(leases):
        held.update(_heartbeat(batch, worker_id=worker_id))
    return held


def _heartbeat(leases: list[Lease], *, worker_id: str) -> dict[uuid.UUID, bool]:
    rows = sql.rows(
        f"""
        WITH {locked_leases(MY_LEASES)},
        renewed AS (
            UPDATE dl_jobs j
            SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
            FROM mine WHERE {LEASE_MATCH}
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


# Running jobs whose newest ``picked`` event names one of the workers ``names`` (running jobs are
# few, and each one's events are one index probe away): the jobs those workers were given last.
RUNNING_PICKED_BY = f"""
    dl_jobs j, LATERAL (
        SELECT payload ->> 'worker' AS worker FROM dl_job_events e
        WHERE e.job_id = j.job_id AND e.kind = 'picked' ORDER BY e.event_id DESC LIMIT 1
    ) AS picked
    WHERE j.status = {RUNNING_SQL} AND picked.worker = ANY(%(names)s)
"""


def jobs_release(*, leases: list[Lease], worker_id: str, reason: str) -> int:
    """Give running jobs back to their queue now; return how many. ``reason``: ``worker_shutdown``
    (runs that outlasted the shutdown timeout) or ``claim_lost`` (jobs a claim gave the worker
    whose answer never reached it: they never ran).

    The run was the worker's to stop, not the job's to fail: its attempt is given back. Its
    started_at is cleared too, so the next claim's lease (attempt, started_at) differs from
    this one and a straggling write under the old lease still matches nothing.
    """
    return sum(_release(batch, worker_id=worker_id, reason=reason) for batch in in_batches(leases))


def _release(leases: list[Lease], *, worker_id: str, reason: str) -> int:
    rows = sql.rows(
        f"""
        WITH mine AS ({MY_LEASES}),
        released AS (
            UPDATE dl_jobs j
            SET status = {QUEUED_SQL}, attempt = j.attempt - 1, started_at = NULL, available_at = now(),
                lease_expires_at = NULL
            FROM mine WHERE {LEASE_GUARD}
            RETURNING j.job_id, j.queue, j.attempt
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'requeue',
                   jsonb_build_object('reason', %(reason)s::text, 'worker', %(worker)s::text, 'attempt_returned', attempt + 1)
            FROM released
        )
        SELECT count(*) FROM released
        """,
        {**lease_params(leases), "worker": worker_id, "reason": reason},
    )
    return rows[0][0]
