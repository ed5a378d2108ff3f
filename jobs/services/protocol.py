"""The worker protocol: claim, renew leases, record outcomes, hand slots on, release.

Writes to a running job are guarded by its lease: ``status = 'running'`` and the
(attempt, started_at) pair the worker got at claim time. A worker whose lease expired and
was reaped (the job was requeued and claimed again, attempt + 1), released (started_at
cleared) or reset by an operator matches nothing and cannot overwrite the job.
"""

import json
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.db import DatabaseError, IntegrityError, transaction

from jobs.models import NOTIFY_CHANNEL
from pipeline_project.core import sql
from pipeline_project.core.storable import first_line, storable_text


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
    has_successor: bool = False  # another job of its lock_key waited in its queue when it was claimed


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
    progress: dict | None = None  # the run's last progress, if not written yet


def _lease_params(leases: list[Lease]) -> dict:
    """The leases as the arrays ``_MY_LEASES`` unnests."""
    return {
        "job_ids": [lease.job_id for lease in leases],
        "attempts": [lease.attempt for lease in leases],
        "started": [lease.started_at for lease in leases],
    }


# What claiming does to a job (``j``) and what it returns (``_claimed_job`` reads the columns).
_CLAIM_SET = """
    status = 'running', attempt = j.attempt + 1, started_at = COALESCE(j.started_at, now()),
    heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
"""
# The statement's snapshot still shows ``j`` queued, hence ``s.job_id <> j.job_id``.
_CLAIMED_COLUMNS = """
    j.job_id, j.attempt, j.started_at, j.queue, j.task, j.args, j.lock_key, j.partition_key, j.max_attempts,
    j.lease_ttl_sec, j.cancel_requested,
    EXISTS (SELECT FROM dl_jobs s
            WHERE s.queue = j.queue AND s.lock_key = j.lock_key AND s.status = 'queued' AND s.job_id <> j.job_id)
"""


def _claimed_job(row) -> ClaimedJob:
    return ClaimedJob(
        lease=Lease(job_id=row[0], attempt=row[1], started_at=row[2]),
        queue=row[3],
        task=row[4],
        args=sql.json_value(row[5]),
        lock_key=row[6],
        partition_key=row[7],
        max_attempts=row[8],
        lease_ttl_sec=row[9],
        cancel_requested=row[10],
        has_successor=row[11],
    )


# A claim reads at most this many available jobs in order looking for free lock_keys, then (if
# it found too few) the queue's lock_keys one by one, at most this many: either walk is bounded.
CLAIM_WINDOW = 1000
CLAIM_MAX_KEYS = 1000

# The claim, as CTEs ending in ``claimed`` (the claimed rows), for a statement that starts
# WITH RECURSIVE: a first pass over the first ``window`` available jobs in order (rows locked
# by a concurrent claim are passed over, rows of busy keys never locked), then, if that found
# too few, a second pass over each key's first job. Both passes find nothing in a paused queue. Parameters: queue, limit, window,
# max_keys, and ``ending``: jobs the same statement ends, whose lock_keys count as free
# although its snapshot shows them running. ``{after}``: more conditions on a candidate ``c``.
_CLAIM_CTES = """
    first_pass AS MATERIALIZED (
        SELECT c.job_id
        FROM (
            SELECT job_id, lock_key, priority, created_at FROM dl_jobs
            WHERE status = 'queued' AND queue = %(queue)s AND available_at <= now()
              AND (SELECT paused FROM dl_queues WHERE name = %(queue)s) IS NOT TRUE
            ORDER BY priority, created_at, job_id
            LIMIT %(window)s
        ) AS w
        JOIN dl_jobs c ON c.job_id = w.job_id
        -- Scalar subqueries, not NOT EXISTS: the planner would turn those into anti-joins
        -- that scan every running job; these are one index probe per candidate.
        WHERE c.status = 'queued'
          AND (SELECT true FROM dl_jobs r
               WHERE r.lock_key = w.lock_key AND r.status = 'running' AND r.job_id <> ALL (%(ending)s::uuid[])
               LIMIT 1) IS NULL
          AND (SELECT true FROM dl_jobs e
               WHERE e.queue = %(queue)s AND e.lock_key = w.lock_key AND e.status = 'queued'
                 AND (e.priority, e.created_at, e.job_id) < (w.priority, w.created_at, w.job_id)
               LIMIT 1) IS NULL
          {after}
        ORDER BY w.priority, w.created_at, w.job_id
        LIMIT %(limit)s
        FOR UPDATE OF c SKIP LOCKED
    ),
    keys AS (
        SELECT first.lock_key, 1 AS n FROM (
            SELECT lock_key FROM dl_jobs
            WHERE status = 'queued' AND queue = %(queue)s AND (SELECT count(*) FROM first_pass) < %(limit)s
              AND (SELECT paused FROM dl_queues WHERE name = %(queue)s) IS NOT TRUE
            ORDER BY lock_key LIMIT 1
        ) AS first
        UNION ALL
        SELECT next.lock_key, keys.n + 1 FROM keys, LATERAL (
            SELECT lock_key FROM dl_jobs
            WHERE status = 'queued' AND queue = %(queue)s AND lock_key > keys.lock_key
            ORDER BY lock_key LIMIT 1
        ) AS next
        WHERE keys.n < %(max_keys)s
    ),
    heads AS (
        SELECT head.job_id FROM keys, LATERAL (
            SELECT job_id, available_at FROM dl_jobs
            WHERE status = 'queued' AND queue = %(queue)s AND lock_key = keys.lock_key
            ORDER BY priority, created_at, job_id LIMIT 1
        ) AS head
        WHERE head.available_at <= now()
          AND (SELECT true FROM dl_jobs r
               WHERE r.lock_key = keys.lock_key AND r.status = 'running' AND r.job_id <> ALL (%(ending)s::uuid[])
               LIMIT 1) IS NULL
    ),
    second_pass AS MATERIALIZED (
        SELECT c.job_id FROM dl_jobs c
        WHERE c.job_id = ANY (ARRAY(SELECT job_id FROM heads)) AND c.status = 'queued'
          AND c.job_id <> ALL (ARRAY(SELECT job_id FROM first_pass))
          {after}
        ORDER BY c.priority, c.created_at, c.job_id
        LIMIT %(limit)s - (SELECT count(*) FROM first_pass)
        FOR UPDATE OF c SKIP LOCKED
    ),
    claimed AS (
        UPDATE dl_jobs j SET {claim_set}
        WHERE j.job_id = ANY (ARRAY(SELECT job_id FROM first_pass UNION ALL SELECT job_id FROM second_pass))
        RETURNING {claimed_columns}, j.priority, j.created_at
    )
"""


def _claim_ctes(*, after: str = "") -> str:
    return _CLAIM_CTES.format(after=after, claim_set=_CLAIM_SET, claimed_columns=_CLAIMED_COLUMNS)


def _claim_params(*, queue: str, limit: int, ending: list[uuid.UUID] = ()) -> dict:
    return {
        "queue": queue,
        "limit": limit,
        "window": CLAIM_WINDOW,
        "max_keys": CLAIM_MAX_KEYS,
        "ending": list(ending),
    }


_PICKED_EVENTS = (
    "SELECT job_id, queue, 'picked', jsonb_build_object('worker', %(worker)s::text, 'attempt', attempt) FROM claimed"
)


def jobs_claim(*, queue: str, limit: int, worker_id: str) -> list[ClaimedJob]:
    """Claim up to ``limit`` available jobs of a queue, in (priority, created_at) order.

    A job is claimable when no job with its lock_key is running and none of its queue is
    queued before it: jobs of one key run one at a time, in order, and a key's next job is
    claimable the moment its predecessor finishes. Jobs of busy keys are passed over with no
    write and no event. The claim looks for free jobs among the first ``CLAIM_WINDOW``
    available ones; if that yields too few (a long backlog of busy keys in front), it also
    takes the head job of each of the queue's keys, key by key, so free keys behind the
    backlog are found too. ``FOR UPDATE SKIP LOCKED`` inside a materialized CTE keeps the
    LIMIT a fence. The partial unique index on running lock_keys is the final guarantee: a
    claim that loses a race to it (two queues, one key) fails with a unique violation, and
    the caller simply claims again.
    """
    rows = sql.rows(
        f"""
        WITH RECURSIVE {_claim_ctes()},
        journal AS (INSERT INTO dl_job_events (job_id, queue, kind, payload) {_PICKED_EVENTS})
        SELECT * FROM claimed ORDER BY priority, created_at, job_id
        """,
        {**_claim_params(queue=queue, limit=limit), "worker": worker_id},
    )
    return [_claimed_job(row) for row in rows]


def jobs_set_aside_unclaimable(*, queue: str, limit: int, worker_id: str) -> list[uuid.UUID]:
    """Fail the jobs at the head of a queue that the database refuses to claim; return their ids.

    For when a claim fails with an error that is not about the connection. Each candidate
    gets the claim's change (running, a new attempt and lease) alone, inside a savepoint that
    is always rolled back: one the database refuses (say, a lock_key too large for its index)
    is failed with a journal event giving the database's reason, so the jobs behind it can be
    claimed again; a lock_key held by a running job is not a refusal.
    """
    refused: dict[uuid.UUID, str] = {}
    with transaction.atomic():
        candidates = sql.rows(
            """
            SELECT job_id FROM dl_jobs WHERE status = 'queued' AND queue = %s AND available_at <= now()
            ORDER BY priority, created_at LIMIT %s FOR UPDATE SKIP LOCKED
            """,
            [queue, limit],
        )
        for (job_id,) in candidates:
            savepoint = transaction.savepoint_create()
            try:
                sql.execute(f"UPDATE dl_jobs j SET {_CLAIM_SET} WHERE j.job_id = %s", [job_id])
            except IntegrityError as exc:
                if not is_lock_key_race(exc):
                    refused[job_id] = first_line(exc)
            except DatabaseError as exc:
                refused[job_id] = first_line(exc)
            finally:
                transaction.savepoint_rollback(savepoint)
        if refused:
            sql.execute(
                """
                WITH refused AS (SELECT * FROM unnest(%s::uuid[], %s::text[]) AS r(job_id, reason)),
                failed AS (
                    UPDATE dl_jobs j
                    SET status = 'failed', finished_at = now(), error = 'The database refused to run this job: ' || r.reason
                    FROM refused r WHERE j.job_id = r.job_id
                    RETURNING j.job_id, j.queue, r.reason
                )
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT job_id, queue, 'failed', jsonb_build_object('reason', 'unclaimable', 'error', reason, 'worker', %s::text)
                FROM failed
                """,
                [list(refused), [storable_text(reason)[:1000] for reason in refused.values()], worker_id],
            )
    return list(refused)


def is_lock_key_race(exc: IntegrityError) -> bool:
    """A claim that lost the race for a lock_key to another worker's claim (harmless: claim again)."""
    return getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) == "ux_dl_jobs_running_lock_key"


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
    rows = sql.rows(
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


# Ending runs, as CTEs ``mine`` (the outcomes) and ``ended`` (the jobs changed), then the
# announcement of freed lock_keys (``announced``), for statements that end runs. ``{taken}``:
# a condition on ``e`` true when the statement itself took the key's next job.
_END_CTES = """
    mine AS (
        SELECT * FROM unnest(%(job_ids)s::uuid[], %(attempts)s::int[], %(started)s::timestamptz[],
                             %(kinds)s::text[], %(errors)s::text[], %(payloads)s::jsonb[], %(delays)s::float8[],
                             %(progress)s::jsonb[])
            AS mine(job_id, attempt, started_at, kind, error, payload, delay, progress)
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
            lease_expires_at = NULL,
            progress = COALESCE(mine.progress, j.progress)
        FROM mine
        WHERE {guard}
        RETURNING j.job_id, j.queue, j.lock_key, j.attempt, j.available_at, j.status AS next_status, mine.payload
    ),
    -- Keys these runs freed whose next job is claimable now, by any worker: wake them (one
    -- NOTIFY per queue, as the ready trigger sends). A requeued job is its key's next job itself.
    announced AS (
        SELECT pg_notify('{channel}', queue) FROM (
            SELECT DISTINCT e.queue FROM ended e
            WHERE e.next_status <> 'queued' AND NOT ({taken})
              AND (SELECT true FROM dl_jobs w
                   WHERE w.queue = e.queue AND w.lock_key = e.lock_key AND w.status = 'queued' LIMIT 1)
        ) AS freed
    )
"""
_END_EVENTS = """
    SELECT job_id, queue,
           CASE next_status WHEN 'succeeded' THEN 'done' WHEN 'queued' THEN 'requeue' ELSE next_status::text END,
           payload || jsonb_build_object('worker', %(worker)s::text, 'attempt', attempt)
           || CASE WHEN next_status = 'queued' THEN jsonb_build_object('reason', 'retry', 'available_at', available_at)
                   ELSE '{}'::jsonb END
    FROM ended
"""
# Read by the final SELECT: a SELECT CTE runs only if something reads it; set_config with
# is_local lasts until the statement's (autocommit) transaction commits.
_END_CONDITIONS = """
    (SELECT count(*) FROM announced) >= 0
    AND (%(synchronous_commit)s::text IS NULL OR set_config('synchronous_commit', %(synchronous_commit)s, true) <> '')
"""


def _end_ctes(*, taken: str = "false") -> str:
    return _END_CTES.format(guard=_GUARD, channel=NOTIFY_CHANNEL, taken=taken)


def _end_params(outcomes: list[Outcome], *, worker_id: str, synchronous_commit: str | None) -> dict:
    return {
        **_lease_params([outcome.lease for outcome in outcomes]),
        "kinds": [outcome.kind for outcome in outcomes],
        "errors": [outcome.error for outcome in outcomes],
        "payloads": [json.dumps(_outcome_payload(outcome)) for outcome in outcomes],
        "delays": [outcome.retry_delay_sec for outcome in outcomes],
        "progress": [None if outcome.progress is None else json.dumps(outcome.progress) for outcome in outcomes],
        "synchronous_commit": synchronous_commit,
        "worker": worker_id,
    }


def jobs_complete(
    *, outcomes: list[Outcome], worker_id: str, synchronous_commit: str | None = None
) -> dict[uuid.UUID, str]:
    """Record how runs ended, all in one statement; return ``{job_id: new status}``.

    succeeded → succeeded; canceled → canceled; fatal → failed; error → queued again
    after ``retry_delay_sec`` while attempts remain, else failed. Outcomes whose lease
    is no longer held are ignored (absent from the answer). ``synchronous_commit`` sets that
    setting for this statement only.
    """
    if not outcomes:
        return {}
    rows = sql.rows(
        f"""
        WITH {_end_ctes()},
        journal AS (INSERT INTO dl_job_events (job_id, queue, kind, payload) {_END_EVENTS})
        SELECT job_id, next_status::text FROM ended WHERE {_END_CONDITIONS}
        """,
        _end_params(outcomes, worker_id=worker_id, synchronous_commit=synchronous_commit),
    )
    return dict(rows)


# The claim after ending runs: ended first (their keys free up), and not a key whose ended job
# was requeued (the snapshot shows that job running, but it is its key's first job again).
_AFTER_ENDED = """
    AND (SELECT count(*) FROM ended) > 0
    AND c.lock_key <> ALL (ARRAY(SELECT lock_key FROM ended WHERE next_status = 'queued'))
"""


def job_complete_and_claim(
    *, outcome: Outcome, queue: str, worker_id: str, synchronous_commit: str | None = None
) -> tuple[str | None, ClaimedJob | None]:
    """Record one run's outcome and claim the next job for its slot, in one statement.

    For a run whose lock_key has jobs waiting: its key counts as free for this claim, so the
    slot goes to the queue's first claimable job — the key's next job, unless another is due
    before it — with no claim round trip and no race between workers for it. Returns the
    job's new status (None: the lease was gone, nothing written or claimed) and the claimed
    job, if any.
    """
    rows = sql.rows(
        f"""
        WITH RECURSIVE {_end_ctes(taken="EXISTS (SELECT FROM claimed c WHERE c.lock_key = e.lock_key)")},
        {_claim_ctes(after=_AFTER_ENDED)},
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload) {_END_EVENTS} UNION ALL {_PICKED_EVENTS}
        )
        SELECT ended.next_status::text, claimed.* FROM ended LEFT JOIN claimed ON true WHERE {_END_CONDITIONS}
        """,
        {
            **_end_params([outcome], worker_id=worker_id, synchronous_commit=synchronous_commit),
            **_claim_params(queue=queue, limit=1, ending=[outcome.lease.job_id]),
        },
    )
    if not rows:
        return None, None
    return rows[0][0], (_claimed_job(rows[0][1:]) if rows[0][1] is not None else None)


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
    rows = sql.rows(
        f"""
        WITH mine AS ({_MY_LEASES})
        UPDATE dl_jobs j SET progress = %(progress)s::jsonb FROM mine WHERE {_GUARD}
        RETURNING j.cancel_requested
        """,
        {**_lease_params([lease]), "progress": json.dumps(progress)},
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
        WITH mine AS ({_MY_LEASES}),
        released AS (
            UPDATE dl_jobs j
            SET status = 'queued', attempt = j.attempt - 1, started_at = NULL, available_at = now(),
                lease_expires_at = NULL
            FROM mine WHERE {_GUARD}
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
        {**_lease_params(leases), "worker": worker_id},
    )
    return rows[0][0]
