"""State changes of jobs: enqueue, cancel, delete, retry, and the worker protocol
(claim, heartbeat, complete, release, reap, prune).

Every change is one statement (or one short transaction) that also writes its journal
rows to ``dl_job_events``, so the journal and the job never disagree. Writes to a running
job are guarded by its lease: ``status = 'running'`` and the (attempt, started_at) pair
the worker got at claim time. A worker whose lease expired and was reaped (the job was
requeued and claimed again, attempt + 1) or reset by an operator (started_at cleared)
matches nothing and cannot overwrite the job.
"""

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction

from jobs.models import JobStatus, uuid7
from pipeline_project.core.errors import ConflictError, NotFoundError

# Any constant: the reaper's transaction-scoped advisory lock, so one reaper acts at a time.
REAPER_LOCK_ID = 0x646C7265  # "dlre"
REAP_BATCH = 1000


@dataclass(frozen=True)
class JobSpec:
    queue: str
    task: str
    lock_key: str
    args: dict = field(default_factory=dict)
    idempotency_key: str | None = None
    partition_key: str = ""
    priority: int = 100
    available_at: datetime | None = None
    max_attempts: int = 5
    lease_ttl_sec: int = 60
    producer: str | None = None
    consumer_group: str | None = None
    job_id: uuid.UUID | None = None


@dataclass(frozen=True)
class Enqueued:
    job_id: uuid.UUID
    status: str
    created: bool


@dataclass(frozen=True)
class Lease:
    """What a worker holds on a running job; every write it makes is guarded by it."""

    job_id: uuid.UUID
    attempt: int
    started_at: datetime


@dataclass(frozen=True)
class ClaimedJob:
    lease: Lease
    queue: str
    task: str
    args: dict
    lock_key: str
    partition_key: str
    max_attempts: int
    lease_ttl_sec: int
    cancel_requested: bool


@dataclass(frozen=True)
class Outcome:
    """How a run ended. ``kind``: succeeded, error (retry or fail), fatal (fail now), canceled."""

    lease: Lease
    kind: str
    result: object = None
    error: str | None = None
    details: dict = field(default_factory=dict)
    retry_delay_sec: float = 0.0
    duration_ms: float | None = None


def _rows(sql: str, params) -> list[tuple]:
    """Run a statement that returns rows (asking a cursor for its description costs the hot path)."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def _execute(sql: str, params) -> None:
    """Run a statement that returns no rows."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _json(value):
    """jsonb arrives as text through Django's cursor (Django decodes it in JSONField)."""
    return json.loads(value) if isinstance(value, str) else value


def _lease_params(leases: list[Lease]) -> dict:
    """The leases as the arrays ``_MY_LEASES`` unnests."""
    return {
        "job_ids": [lease.job_id for lease in leases],
        "attempts": [lease.attempt for lease in leases],
        "started": [lease.started_at for lease in leases],
    }


# --- producers and operators ------------------------------------------------------------

_SIGNATURE_FIELDS = ("queue", "task", "args", "lock_key")


def job_enqueue_many(*, specs: list[JobSpec]) -> list[Enqueued]:
    """Insert jobs (and their ``queued`` events) in one statement; idempotent per key.

    A spec whose idempotency_key already names a job returns that job, unless the job was
    made with a different queue, task, args or lock_key: then nothing is written and the
    call is a conflict. Concurrent calls with one key create exactly one job, because
    ``ON CONFLICT DO NOTHING`` waits for the first insert to commit.
    """
    new_ids = [spec.job_id or uuid7() for spec in specs]
    columns = {
        "job_id": ("uuid", new_ids),
        "queue": ("text", [s.queue for s in specs]),
        "task": ("text", [s.task for s in specs]),
        "args": ("jsonb", [json.dumps(s.args) for s in specs]),
        "idempotency_key": ("text", [s.idempotency_key for s in specs]),
        "lock_key": ("text", [s.lock_key for s in specs]),
        "partition_key": ("text", [s.partition_key for s in specs]),
        "priority": ("int", [s.priority for s in specs]),
        "available_at": ("timestamptz", [s.available_at for s in specs]),
        "max_attempts": ("int", [s.max_attempts for s in specs]),
        "lease_ttl_sec": ("int", [s.lease_ttl_sec for s in specs]),
        "producer": ("text", [s.producer for s in specs]),
        "consumer_group": ("text", [s.consumer_group for s in specs]),
    }
    unnest = ", ".join(f"%s::{sql_type}[]" for sql_type, _values in columns.values())
    names = ", ".join(columns)
    with transaction.atomic():
        inserted = {
            row[0]: row[1]
            for row in _rows(
                f"""
                WITH input AS (SELECT * FROM unnest({unnest}) AS t({names})),
                inserted AS (
                    INSERT INTO dl_jobs ({names})
                    SELECT job_id, queue, task, args, idempotency_key, lock_key, partition_key, priority,
                           COALESCE(available_at, now()), max_attempts, lease_ttl_sec, producer, consumer_group
                    FROM input
                    ON CONFLICT (idempotency_key) DO NOTHING
                    RETURNING job_id, queue, status, producer, idempotency_key
                ),
                journal AS (
                    INSERT INTO dl_job_events (job_id, queue, kind, payload)
                    SELECT job_id, queue, 'queued', jsonb_build_object('producer', producer, 'idempotency_key', idempotency_key)
                    FROM inserted
                )
                SELECT job_id, status::text FROM inserted
                """,
                [values for _sql_type, values in columns.values()],
            )
        }
        keys = [spec.idempotency_key for spec, job_id in zip(specs, new_ids, strict=True) if job_id not in inserted]
        existing = _existing_by_key(keys) if keys else {}
        results = []
        for spec, job_id in zip(specs, new_ids, strict=True):
            if job_id in inserted:
                results.append(Enqueued(job_id=job_id, status=inserted[job_id], created=True))
                continue
            found = existing[spec.idempotency_key]
            mismatched = [name for name in _SIGNATURE_FIELDS if found[name] != getattr(spec, name)]
            if mismatched:
                raise ConflictError(
                    f"idempotency_key {spec.idempotency_key!r} already names a different job.",
                    code="idempotency_conflict",
                    details={
                        "idempotency_key": spec.idempotency_key,
                        "job_id": str(found["job_id"]),
                        "differs": mismatched,
                    },
                )
            results.append(Enqueued(job_id=found["job_id"], status=found["status"], created=False))
    return results


def _existing_by_key(keys: list[str]) -> dict[str, dict]:
    rows = _rows(
        "SELECT idempotency_key, job_id, status::text, queue, task, args, lock_key FROM dl_jobs WHERE idempotency_key = ANY(%s)",
        [keys],
    )
    return {
        key: {
            "job_id": job_id,
            "status": status,
            "queue": queue,
            "task": task,
            "args": _json(args),
            "lock_key": lock_key,
        }
        for key, job_id, status, queue, task, args, lock_key in rows
    }


def job_enqueue(*, spec: JobSpec) -> Enqueued:
    return job_enqueue_many(specs=[spec])[0]


def job_cancel(*, job_id: uuid.UUID, requested_by: str = "api") -> str:
    """Cancel a job: a queued job at once, a running one cooperatively; return its status.

    Finished jobs answer a conflict, except a canceled one (a repeat is harmless).
    """
    with transaction.atomic():
        rows = _rows("SELECT status::text, queue FROM dl_jobs WHERE job_id = %s FOR UPDATE", [job_id])
        if not rows:
            raise NotFoundError(f"No job {job_id}.", details={"job_id": str(job_id)})
        status, queue = rows[0]
        if status == JobStatus.QUEUED:
            _execute(
                """
                WITH canceled AS (
                    UPDATE dl_jobs SET status = 'canceled', cancel_requested = true, finished_at = now(), lease_expires_at = NULL
                    WHERE job_id = %s RETURNING job_id, queue
                )
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT job_id, queue, 'canceled', jsonb_build_object('by', %s::text, 'while', 'queued') FROM canceled
                """,
                [job_id, requested_by],
            )
            return JobStatus.CANCELED
        if status == JobStatus.RUNNING:
            _execute("UPDATE dl_jobs SET cancel_requested = true WHERE job_id = %s", [job_id])
            # Wake the worker running it; it also learns from its next heartbeat.
            _execute("SELECT pg_notify('dl_jobs_cancel', %s)", [str(job_id)])
            return JobStatus.RUNNING
        if status == JobStatus.CANCELED:
            return status
        raise ConflictError(
            f"Job {job_id} is already {status}.",
            code="job_finished",
            details={"job_id": str(job_id), "status": status},
        )


def job_retry(*, job_id: uuid.UUID, requested_by: str = "admin") -> bool:
    """Put a failed, canceled or lost job back in its queue as new (attempts reset)."""
    rows = _rows(
        """
        WITH retried AS (
            UPDATE dl_jobs
            SET status = 'queued', attempt = 0, available_at = now(), cancel_requested = false,
                started_at = NULL, finished_at = NULL, heartbeat_at = NULL, lease_expires_at = NULL, error = NULL
            WHERE job_id = %s AND status IN ('failed', 'canceled', 'lost')
            RETURNING job_id, queue
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'requeue', jsonb_build_object('reason', 'retry_requested', 'by', %s::text) FROM retried
        )
        SELECT job_id FROM retried
        """,
        [job_id, requested_by],
    )
    return bool(rows)


@dataclass(frozen=True)
class Deletion:
    job_id: uuid.UUID
    status: str
    events: int
    deleted: bool
    dry_run: bool


def job_delete(*, job_id: uuid.UUID, dry_run: bool = False, force: bool = False) -> Deletion:
    """Delete a job and its journal. A running job needs ``force`` (its worker's writes then miss)."""
    with transaction.atomic():
        rows = _rows(
            "SELECT status::text, (SELECT count(*) FROM dl_job_events WHERE job_id = %s) FROM dl_jobs WHERE job_id = %s FOR UPDATE",
            [job_id, job_id],
        )
        if not rows:
            raise NotFoundError(f"No job {job_id}.", details={"job_id": str(job_id)})
        status, events = rows[0]
        if status == JobStatus.RUNNING and not force:
            raise ConflictError(
                f"Job {job_id} is running; cancel it first or delete with force=true.",
                code="job_running",
                details={"job_id": str(job_id), "status": status},
            )
        if not dry_run:
            _execute("DELETE FROM dl_jobs WHERE job_id = %s", [job_id])
    return Deletion(job_id=job_id, status=status, events=events, deleted=not dry_run, dry_run=dry_run)


# --- the worker protocol ----------------------------------------------------------------


def jobs_claim(
    *, queue: str, limit: int, worker_id: str, busy_backoff_sec: float, skip_lock_keys: list[str] = ()
) -> tuple[list[ClaimedJob], int]:
    """Claim up to ``limit`` available jobs of a queue; return them and how many bounced.

    The candidates are picked in (priority, created_at) order with ``FOR UPDATE SKIP
    LOCKED`` inside a materialized CTE, so the LIMIT holds however the planner runs the
    rest. A candidate whose lock_key is held (a running job has it, an earlier candidate
    in this batch takes it, or a concurrent claim is taking it right now) is bounced:
    available again after ``busy_backoff_sec``, its attempts untouched. The partial
    unique index on running lock_keys is the final guarantee; a claim that loses a race
    against it fails with a unique violation and the caller simply claims again.

    ``skip_lock_keys`` are keys of the caller's own jobs that finished but are not recorded
    yet: their jobs are left alone (not bounced) and taken by a later claim.
    """
    rows = _rows(
        """
        WITH candidates AS MATERIALIZED (
            SELECT job_id, lock_key, priority, created_at
            FROM dl_jobs
            WHERE status = 'queued' AND queue = %(queue)s AND available_at <= now()
              AND lock_key <> ALL (%(skip)s::text[])
            ORDER BY priority, created_at
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        ),
        ranked AS MATERIALIZED (
            SELECT c.job_id,
                   row_number() OVER (PARTITION BY c.lock_key ORDER BY c.priority, c.created_at) > 1
                   OR held.job_id IS NOT NULL
                   OR NOT pg_try_advisory_xact_lock(hashtext(c.lock_key)) AS busy
            FROM candidates c
            -- One probe per candidate (never a scan of every running job).
            LEFT JOIN LATERAL (
                SELECT h.job_id FROM dl_jobs h WHERE h.lock_key = c.lock_key AND h.status = 'running' LIMIT 1
            ) AS held ON true
        ),
        updated AS (
            -- Free keys: running under a new lease. Busy keys: bounced, attempts untouched.
            UPDATE dl_jobs j
            SET status = CASE WHEN r.busy THEN j.status ELSE 'running' END,
                attempt = CASE WHEN r.busy THEN j.attempt ELSE j.attempt + 1 END,
                started_at = CASE WHEN r.busy THEN j.started_at ELSE COALESCE(j.started_at, now()) END,
                heartbeat_at = CASE WHEN r.busy THEN j.heartbeat_at ELSE now() END,
                lease_expires_at = CASE WHEN r.busy THEN j.lease_expires_at
                                        ELSE now() + make_interval(secs => j.lease_ttl_sec) END,
                available_at = CASE WHEN r.busy THEN now() + make_interval(secs => %(backoff)s) ELSE j.available_at END
            FROM ranked r
            WHERE j.job_id = ANY (ARRAY(SELECT job_id FROM ranked)) AND j.job_id = r.job_id
            RETURNING r.busy, j.job_id, j.attempt, j.started_at, j.queue, j.task, j.args, j.lock_key, j.partition_key,
                      j.max_attempts, j.lease_ttl_sec, j.cancel_requested, j.priority, j.created_at, j.available_at
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue,
                   CASE WHEN busy THEN 'requeue' ELSE 'picked' END,
                   CASE WHEN busy THEN jsonb_build_object('reason', 'lock_key_busy', 'lock_key', lock_key,
                                                          'available_at', available_at, 'worker', %(worker)s::text)
                        ELSE jsonb_build_object('worker', %(worker)s::text, 'attempt', attempt) END
            FROM updated
        )
        SELECT busy, job_id, attempt, started_at, queue, task, args, lock_key, partition_key, max_attempts,
               lease_ttl_sec, cancel_requested
        FROM updated
        ORDER BY priority, created_at
        """,
        {
            "queue": queue,
            "limit": limit,
            "worker": worker_id,
            "backoff": busy_backoff_sec,
            "skip": list(skip_lock_keys),
        },
    )
    jobs = [
        ClaimedJob(
            lease=Lease(job_id=row[1], attempt=row[2], started_at=row[3]),
            queue=row[4],
            task=row[5],
            args=_json(row[6]),
            lock_key=row[7],
            partition_key=row[8],
            max_attempts=row[9],
            lease_ttl_sec=row[10],
            cancel_requested=row[11],
        )
        for row in rows
        if not row[0]
    ]
    bounced = len(rows) - len(jobs)
    return jobs, bounced


_MY_LEASES = """
    SELECT * FROM unnest(%(job_ids)s::uuid[], %(attempts)s::int[], %(started)s::timestamptz[]) AS mine(job_id, attempt, started_at)
"""
# The lease guard. ``j.job_id = ANY(...)`` keeps the plan on the primary key whatever the
# planner guesses about the unnested leases.
_GUARD = (
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
    rows = _rows(
        f"""
        WITH mine AS ({_MY_LEASES}),
        renewed AS (
            UPDATE dl_jobs j
            SET heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
            FROM mine WHERE {_GUARD}
            RETURNING j.job_id, j.queue, j.cancel_requested
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'heartbeat', jsonb_build_object('worker', %(worker)s::text) FROM renewed
        )
        SELECT job_id, cancel_requested FROM renewed
        """,
        {**_lease_params(leases), "worker": worker_id},
    )
    return dict(rows)


def jobs_complete(*, outcomes: list[Outcome], worker_id: str) -> dict[uuid.UUID, str]:
    """Record how runs ended, all in one statement; return ``{job_id: new status}``.

    succeeded → succeeded; canceled → canceled; fatal → failed; error → queued again
    after ``retry_delay_sec`` while attempts remain, else failed. Outcomes whose lease
    is no longer held are ignored (absent from the answer).
    """
    if not outcomes:
        return {}
    rows = _rows(
        f"""
        WITH mine AS (
            SELECT * FROM unnest(%(job_ids)s::uuid[], %(attempts)s::int[], %(started)s::timestamptz[],
                                 %(kinds)s::text[], %(errors)s::text[], %(payloads)s::jsonb[], %(delays)s::float8[])
                AS mine(job_id, attempt, started_at, kind, error, payload, delay)
        ),
        ended AS (
            UPDATE dl_jobs j
            SET status = (CASE
                    WHEN mine.kind = 'succeeded' THEN 'succeeded'
                    WHEN mine.kind = 'canceled' THEN 'canceled'
                    WHEN mine.kind = 'error' AND j.attempt < j.max_attempts THEN 'queued'
                    ELSE 'failed' END)::dl_status,
                error = CASE WHEN mine.kind = 'succeeded' THEN NULL ELSE mine.error END,
                available_at = CASE WHEN mine.kind = 'error' AND j.attempt < j.max_attempts
                                    THEN now() + make_interval(secs => mine.delay) ELSE j.available_at END,
                finished_at = CASE WHEN mine.kind = 'error' AND j.attempt < j.max_attempts THEN NULL ELSE now() END,
                lease_expires_at = NULL
            FROM mine
            WHERE {_GUARD}
            RETURNING j.job_id, j.queue, j.attempt, j.available_at, j.status AS next_status, mine.payload
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue,
                   CASE next_status WHEN 'succeeded' THEN 'done' WHEN 'queued' THEN 'requeue' ELSE next_status::text END,
                   payload || jsonb_build_object('worker', %(worker)s::text, 'attempt', attempt)
                   || CASE WHEN next_status = 'queued' THEN jsonb_build_object('reason', 'retry', 'available_at', available_at)
                           ELSE '{{}}'::jsonb END
            FROM ended
        )
        SELECT job_id, next_status::text FROM ended
        """,
        {
            **_lease_params([outcome.lease for outcome in outcomes]),
            "kinds": [outcome.kind for outcome in outcomes],
            "errors": [outcome.error for outcome in outcomes],
            "payloads": [json.dumps(_outcome_payload(outcome)) for outcome in outcomes],
            "delays": [outcome.retry_delay_sec for outcome in outcomes],
            "worker": worker_id,
        },
    )
    return dict(rows)


def _outcome_payload(outcome: Outcome) -> dict:
    payload = dict(outcome.details)
    if outcome.kind == "succeeded":
        payload["result"] = outcome.result
    if outcome.error:
        payload["error"] = outcome.error
    if outcome.duration_ms is not None:
        payload["duration_ms"] = round(outcome.duration_ms, 3)
    return payload


def job_progress(*, lease: Lease, progress: dict) -> bool | None:
    """Store a running job's progress; return its cancel_requested flag, or None if the lease is gone."""
    rows = _rows(
        f"""
        WITH mine AS ({_MY_LEASES})
        UPDATE dl_jobs j SET progress = %(progress)s::jsonb FROM mine WHERE {_GUARD}
        RETURNING j.cancel_requested
        """,
        {**_lease_params([lease]), "progress": json.dumps(progress)},
    )
    return rows[0][0] if rows else None


def jobs_release(*, leases: list[Lease], worker_id: str) -> int:
    """Give running jobs back to their queue now (a worker shutting down); return how many."""
    if not leases:
        return 0
    rows = _rows(
        f"""
        WITH mine AS ({_MY_LEASES}),
        released AS (
            UPDATE dl_jobs j SET status = 'queued', available_at = now(), lease_expires_at = NULL
            FROM mine WHERE {_GUARD}
            RETURNING j.job_id, j.queue
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'requeue', jsonb_build_object('reason', 'worker_shutdown', 'worker', %(worker)s::text) FROM released
        )
        SELECT count(*) FROM released
        """,
        {**_lease_params(leases), "worker": worker_id},
    )
    return rows[0][0]


@dataclass(frozen=True)
class Reaped:
    requeued: int
    lost: int
    acted: bool  # False when another reaper held the lock


def jobs_reap(*, batch: int = REAP_BATCH) -> Reaped:
    """Return expired leases to their queue; jobs with no attempts left become ``lost``.

    Runs in a transaction holding a transaction-scoped advisory lock, so concurrent
    reapers (every runworker has one) never act at once; the lock needs no session and
    is released at commit even behind a transaction pooler.
    """
    with transaction.atomic():
        if not _rows("SELECT pg_try_advisory_xact_lock(%s)", [REAPER_LOCK_ID])[0][0]:
            return Reaped(requeued=0, lost=0, acted=False)
        rows = _rows(
            """
            WITH expired AS MATERIALIZED (
                SELECT job_id FROM dl_jobs
                WHERE status = 'running' AND lease_expires_at IS NOT NULL AND lease_expires_at < now()
                ORDER BY lease_expires_at
                LIMIT %s
                FOR UPDATE SKIP LOCKED
            ),
            reaped AS (
                UPDATE dl_jobs j
                SET status = CASE WHEN j.attempt >= j.max_attempts THEN 'lost' ELSE 'queued' END::dl_status,
                    available_at = now(), lease_expires_at = NULL,
                    finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
                    error = 'lease expired: the worker stopped heartbeating'
                FROM expired WHERE j.job_id = expired.job_id
                RETURNING j.job_id, j.queue, j.status, j.attempt, j.heartbeat_at
            ),
            journal AS (
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT job_id, queue, CASE status WHEN 'lost' THEN 'lost' ELSE 'requeue' END,
                       jsonb_build_object('reason', 'lease_expired', 'attempt', attempt, 'last_heartbeat_at', heartbeat_at)
                FROM reaped
            )
            SELECT count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status = 'lost') FROM reaped
            """,
            [batch],
        )
    requeued, lost = rows[0]
    return Reaped(requeued=requeued, lost=lost, acted=True)


def jobs_prune(*, older_than_sec: float, max_identical: int, batch: int = 10_000) -> int:
    """Retention: delete finished jobs older than the age limit, and beyond the newest
    ``max_identical`` finished jobs of one signature (queue, task, args), as seed 003's
    ``maxIdentical``. Their events go with them (ON DELETE CASCADE). Returns how many."""
    rows = _rows(
        """
        WITH too_old AS (
            SELECT job_id FROM dl_jobs
            WHERE finished_at IS NOT NULL AND finished_at < now() - make_interval(secs => %(age)s)
            ORDER BY finished_at
            LIMIT %(batch)s
        ),
        crowded AS (
            SELECT queue, task, args FROM dl_jobs
            WHERE finished_at IS NOT NULL
            GROUP BY queue, task, args
            HAVING count(*) > %(keep)s
        ),
        surplus AS (
            SELECT job_id FROM (
                SELECT j.job_id, row_number() OVER (
                    PARTITION BY j.queue, j.task, j.args ORDER BY j.finished_at DESC, j.job_id
                ) AS newest_first
                FROM dl_jobs j JOIN crowded c ON (j.queue, j.task, j.args) = (c.queue, c.task, c.args)
                WHERE j.finished_at IS NOT NULL
            ) ranked
            WHERE newest_first > %(keep)s
            LIMIT %(batch)s
        ),
        pruned AS (
            DELETE FROM dl_jobs WHERE job_id IN (SELECT job_id FROM too_old UNION SELECT job_id FROM surplus)
            RETURNING job_id
        )
        SELECT count(*) FROM pruned
        """,
        {"age": older_than_sec, "keep": max_identical, "batch": batch},
    )
    return rows[0][0]


# --- the worker registry -----------------------------------------------------------------


def worker_register(*, worker_id: uuid.UUID, hostname: str, pid: int, queues: dict[str, int]) -> None:
    _execute(
        "INSERT INTO dl_workers (worker_id, hostname, pid, queues, running_jobs) VALUES (%s, %s, %s, %s::jsonb, 0)",
        [worker_id, hostname, pid, json.dumps(queues)],
    )


def worker_heartbeat(*, worker_id: uuid.UUID, running_jobs: int) -> None:
    _execute(
        "UPDATE dl_workers SET heartbeat_at = now(), running_jobs = %s WHERE worker_id = %s", [running_jobs, worker_id]
    )


def worker_deregister(*, worker_id: uuid.UUID) -> None:
    _execute("DELETE FROM dl_workers WHERE worker_id = %s", [worker_id])


def workers_prune(*, silent_for_sec: float) -> int:
    """Forget workers that stopped heartbeating (killed processes leave their row behind)."""
    rows = _rows(
        "WITH gone AS (DELETE FROM dl_workers WHERE heartbeat_at < now() - make_interval(secs => %s) RETURNING 1) "
        "SELECT count(*) FROM gone",
        [silent_for_sec],
    )
    return rows[0][0]
