"""Claiming jobs: a queue's next claimable jobs become running under a new lease.

The claim's SQL is shared with ``jobs.queue.services.outcomes``, whose statement ends a run and
claims the next job for its slot in one go.
"""

import datetime
import uuid
from dataclasses import dataclass, field

from django.db import DatabaseError, IntegrityError, transaction

from jobs.queue.services.leases import Lease
from jobs.queue.states import FAILED_SQL, QUEUED_SQL, RUNNING_SQL, EventKind, sql_literal
from pipeline_project.db import sql
from pipeline_project.db.storable import first_line, storable_text


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


# What claiming does to a job (``j``) and what it returns (``claimed_job`` reads the columns).
CLAIM_SET = f"""
    status = {RUNNING_SQL}, attempt = j.attempt + 1, started_at = COALESCE(j.started_at, now()),
    heartbeat_at = now(), lease_expires_at = now() + make_interval(secs => j.lease_ttl_sec)
"""
# Whether another job of its key is queued: the statement's snapshot still shows ``j`` queued, so
# two of the key's queued jobs, read in claim order (why: ``FIRST_OF_KEY``).
CLAIMED_COLUMNS = f"""
    j.job_id, j.attempt, j.started_at, j.queue, j.task, j.args, j.lock_key, j.partition_key, j.max_attempts,
    j.lease_ttl_sec, j.cancel_requested,
    (SELECT count(*) FROM (SELECT FROM dl_jobs s
            WHERE s.queue = j.queue AND s.lock_key = j.lock_key AND s.status = {QUEUED_SQL}
            ORDER BY s.priority, s.created_at, s.job_id LIMIT 2) AS queued_of_key) = 2
"""


@dataclass(frozen=True)
class ClaimFloor:
    """A place in a queue's claim order (priority, created_at, job_id), where a claim starts reading."""

    priority: int
    created_at: datetime.datetime
    job_id: uuid.UUID


# Before every job: priorities are never negative (``dl_jobs_chk_positive``).
QUEUE_HEAD = ClaimFloor(0, datetime.datetime.min.replace(tzinfo=datetime.UTC), uuid.UUID(int=0))


@dataclass(frozen=True)
class Claim:
    jobs: list[ClaimedJob] = field(default_factory=list)
    window_head: ClaimFloor | None = None  # the first available job the claim read (None: it read none)


def claimed_job(row) -> ClaimedJob:
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

# The claim's conditions, shared by the claim statements. Scalar subqueries, not NOT EXISTS: the
# planner would turn those into anti-joins that scan every running job; these are one index probe
# per candidate. ``KEY_FREE``: no job of the key runs (but those the statement ends), its status
# condition spelled as ``ix_dl_jobs_running_lock_key``'s predicate, so that no other index of
# running jobs serves it (spelled ``status = 'running'``, it was planned, after an ANALYZE under a
# held xmin, over the seed's ``ix_dl_jobs_running_lease`` or ``ix_dl_jobs_status_queue``, walked
# from end to end); ``FIRST_OF_KEY``: the candidate ``w`` is its key's first queued job, read as the
# key's head in claim order, the order of ``ix_dl_jobs_queued_lock_key``, which reaches it at once
# (the planner, believing few jobs queued after an ANALYZE under a held xmin, had walked the seed's
# ``ix_dl_jobs_claim`` for it).
KEY_FREE = f"""(SELECT true FROM dl_jobs r
               WHERE r.lock_key = {{key}} AND r.status IS NOT DISTINCT FROM {RUNNING_SQL}
                 AND r.job_id <> ALL (%(ending)s::uuid[])
               LIMIT 1) IS NULL"""
FIRST_OF_KEY = f"""(SELECT e.job_id FROM dl_jobs e
               WHERE e.queue = %(queue)s AND e.lock_key = w.lock_key AND e.status = {QUEUED_SQL}
               ORDER BY e.priority, e.created_at, e.job_id
               LIMIT 1) = w.job_id"""
# A candidate, locked, is still queued. Read through the primary key: ``status::text``, a condition
# no index serves, keeps the planner off the partial indexes of queued jobs, which it took for
# this join when it believed few jobs queued and which, under a held xmin, hold an entry for every
# job claimed since (each visited, none removable).
STILL_QUEUED = f"c.status::text = {QUEUED_SQL}"
# The queue is neither paused nor limited: the same one primary-key probe of ``dl_queues`` that
# the pause alone costs. A limited queue is claimed only by ``jobs_claim_limited``, so a worker
# that has not heard yet that a queue became limited claims nothing from it, never too much.
UNLIMITED = """(SELECT paused OR max_running IS NOT NULL OR rate_limit IS NOT NULL
                FROM dl_queues WHERE name = %(queue)s) IS NOT TRUE"""

# The claim, as CTEs ending in ``claimed`` (the claimed rows), for a statement that starts
# WITH RECURSIVE: a first pass over the first ``window`` available jobs in order (rows locked
# by a concurrent claim are passed over, rows of busy keys never locked), then, if that found
# too few although the window was full, a second pass over each key's first job. (With fewer
# available jobs than the window, the first pass saw every one: the second would find nothing,
# yet its walk over the queued keys would visit every index entry a held xmin keeps alive.)
# The first pass reads the window in its order (a CTE is read back in the order it was written)
# with no sort of its own, so it stops at the first ``limit`` free jobs: in a backlog, a claim
# reads and probes a few rows, not the whole window. Both passes find nothing in a paused or
# limited queue (``UNLIMITED``). Parameters: queue, limit, window, max_keys, and ``ending``: jobs
# the same statement ends, whose lock_keys count as free although its snapshot shows them
# running. ``{after}``: more conditions on a candidate ``c``.
CLAIM_CTES = """
    claim_window AS MATERIALIZED (
        SELECT job_id, lock_key, priority, created_at FROM dl_jobs
        WHERE status = {queued} AND queue = %(queue)s AND available_at <= now()
          AND (priority, created_at, job_id) >= (%(floor_priority)s::integer, %(floor_created_at)s::timestamptz, %(floor_job_id)s::uuid)
          AND {unlimited}
        ORDER BY priority, created_at, job_id
        LIMIT %(window)s
    ),
    first_pass AS MATERIALIZED (
        SELECT c.job_id
        FROM claim_window AS w
        JOIN dl_jobs c ON c.job_id = w.job_id
        WHERE {still_queued} AND {key_free_w} AND {first_of_key}
          {after}
        LIMIT %(limit)s
        FOR UPDATE OF c SKIP LOCKED
    ),
    keys AS (
        SELECT first.lock_key, 1 AS n FROM (
            SELECT lock_key FROM dl_jobs
            WHERE status = {queued} AND queue = %(queue)s AND (SELECT count(*) FROM first_pass) < %(limit)s
              AND (SELECT count(*) FROM claim_window) = %(window)s
              AND {unlimited}
            ORDER BY lock_key LIMIT 1
        ) AS first
        UNION ALL
        SELECT next.lock_key, keys.n + 1 FROM keys, LATERAL (
            SELECT lock_key FROM dl_jobs
            WHERE status = {queued} AND queue = %(queue)s AND lock_key > keys.lock_key
            ORDER BY lock_key LIMIT 1
        ) AS next
        WHERE keys.n < %(max_keys)s
    ),
    heads AS (
        SELECT head.job_id FROM keys, LATERAL (
            SELECT job_id, available_at FROM dl_jobs
            WHERE status = {queued} AND queue = %(queue)s AND lock_key = keys.lock_key
            ORDER BY priority, created_at, job_id LIMIT 1
        ) AS head
        WHERE head.available_at <= now() AND {key_free_keys}
    ),
    second_pass AS MATERIALIZED (
        SELECT c.job_id FROM dl_jobs c
        WHERE c.job_id = ANY (ARRAY(SELECT job_id FROM heads)) AND {still_queued}
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


def claim_ctes(*, after: str = "") -> str:
    return CLAIM_CTES.format(
        queued=QUEUED_SQL,
        after=after,
        unlimited=UNLIMITED,
        key_free_w=KEY_FREE.format(key="w.lock_key"),
        key_free_keys=KEY_FREE.format(key="keys.lock_key"),
        first_of_key=FIRST_OF_KEY,
        still_queued=STILL_QUEUED,
        claim_set=CLAIM_SET,
        claimed_columns=CLAIMED_COLUMNS,
    )


def claim_params(*, queue: str, limit: int, ending: list[uuid.UUID] = (), floor: ClaimFloor | None = None) -> dict:
    floor = floor or QUEUE_HEAD
    return {
        "queue": queue,
        "floor_priority": floor.priority,
        "floor_created_at": floor.created_at,
        "floor_job_id": floor.job_id,
        "limit": limit,
        "window": CLAIM_WINDOW,
        "max_keys": CLAIM_MAX_KEYS,
        "ending": list(ending),
    }


PICKED_EVENTS = (
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
    return jobs_claim_from(queue=queue, limit=limit, worker_id=worker_id, floor=None).jobs


def jobs_claim_from(*, queue: str, limit: int, worker_id: str, floor: ClaimFloor | None) -> Claim:
    """Claim like ``jobs_claim``, reading the queue's available jobs from ``floor`` on (None: from
    its head), and say where the read began: the floor for the next claim.

    Why a floor: under a held xmin (a long transaction, a REPEATABLE READ reader) every job claimed
    since leaves an index entry no vacuum may remove, and a claim from the head walks them all (at
    1,000 jobs/s, 235,000 after four minutes: claims of seconds). No job before the window's head
    was available to this claim, so the next one may start there and walk only the entries of the
    jobs claimed in between. Jobs that become available behind a floor (retries, jobs coming due
    or put back, a higher priority) are found by the next claim without one (``jobs.queue.worker.floors``).
    """
    rows = sql.rows(
        f"""
        WITH RECURSIVE {claim_ctes()},
        journal AS (INSERT INTO dl_job_events (job_id, queue, kind, payload) {PICKED_EVENTS})
        SELECT head.priority, head.created_at, head.job_id, claimed.*
        FROM (SELECT priority, created_at, job_id FROM claim_window LIMIT 1) AS head LEFT JOIN claimed ON true
        ORDER BY claimed.priority, claimed.created_at, claimed.job_id
        """,
        {**claim_params(queue=queue, limit=limit, floor=floor), "worker": worker_id},
    )
    if not rows:
        return Claim()
    return Claim(
        jobs=[claimed_job(row[3:]) for row in rows if row[3] is not None],
        window_head=ClaimFloor(*rows[0][:3]),
    )


# The claim of a limited queue, run after ``jobs_claim_limited`` locked the queue's row, so its
# snapshot sees every claim of the queue before it. Candidates (the first ``window`` available
# jobs whose lock_key is free, as in the first pass, at most ``limit`` of them unless budgets are
# per partition) are grouped by ``part`` (the partition_key, or '': one group); each group gets
# its budget: max_running less its running jobs, rate_limit less its starts in the last
# rate_period_sec (NULL: no such limit). Claims are recorded in ``dl_queue_starts`` for the rate,
# stamped now() as the jobs' started_at: the time the claim's transaction began, before it waited
# for the lock. Stamps may thus be recorded out of order; each claim counts every recorded stamp
# after its own minus the period, which keeps any window of one period at rate_limit starts.
# Rows two periods old go in the same statement (one period, were transactions skewed by no more).
LIMITED_CLAIM = """
    WITH limits AS (
        SELECT max_running, rate_limit, rate_period_sec, limit_per_partition AS per_partition,
               now() - make_interval(secs => rate_period_sec) AS since
        FROM dl_queues WHERE name = %(queue)s AND NOT paused
    ),
    candidates AS MATERIALIZED (
        SELECT w.job_id, w.priority, w.created_at, CASE WHEN limits.per_partition THEN w.partition_key ELSE '' END AS part
        FROM limits, (
            SELECT job_id, lock_key, partition_key, priority, created_at FROM dl_jobs
            WHERE status = {queued} AND queue = %(queue)s AND available_at <= now()
            ORDER BY priority, created_at, job_id
            LIMIT %(window)s
        ) AS w
        WHERE {key_free} AND {first_of_key}
        ORDER BY w.priority, w.created_at, w.job_id
        LIMIT (SELECT CASE WHEN per_partition THEN %(window)s ELSE %(limit)s END FROM limits)
    ),
    budgets AS MATERIALIZED (  -- each partition's counts once, not once per candidate
        SELECT p.part, LEAST(
            limits.max_running - (
                SELECT count(*) FROM dl_jobs r
                WHERE r.status = {running} AND r.queue = %(queue)s AND (NOT limits.per_partition OR r.partition_key = p.part)),
            CASE WHEN limits.rate_limit IS NOT NULL THEN limits.rate_limit - (
                SELECT count(*) FROM dl_queue_starts s
                WHERE s.queue = %(queue)s AND s.started_at > limits.since
                  AND (NOT limits.per_partition OR s.partition_key = p.part)) END
        ) AS budget
        FROM limits, (SELECT DISTINCT part FROM candidates) AS p
    ),
    picked AS MATERIALIZED (
        SELECT c.job_id FROM dl_jobs c
        WHERE {still_queued} AND c.job_id = ANY (ARRAY(
            SELECT ranked.job_id FROM (
                SELECT job_id, part, row_number() OVER (PARTITION BY part ORDER BY priority, created_at, job_id) AS n
                FROM candidates
            ) AS ranked JOIN budgets b ON b.part = ranked.part
            WHERE ranked.n <= COALESCE(b.budget, %(limit)s)))
        ORDER BY c.priority, c.created_at, c.job_id
        LIMIT %(limit)s
        FOR UPDATE OF c SKIP LOCKED
    ),
    claimed AS (
        UPDATE dl_jobs j SET {claim_set}
        WHERE j.job_id = ANY (ARRAY(SELECT job_id FROM picked))
        RETURNING {claimed_columns}, j.priority, j.created_at
    ),
    started AS (
        INSERT INTO dl_queue_starts (queue, partition_key, started_at)
        SELECT claimed.queue, claimed.partition_key, now() FROM claimed, limits
        WHERE limits.rate_limit IS NOT NULL
    ),
    pruned AS (
        DELETE FROM dl_queue_starts s USING limits
        WHERE s.queue = %(queue)s AND s.started_at <= limits.since - make_interval(secs => limits.rate_period_sec)
    ),
    journal AS (INSERT INTO dl_job_events (job_id, queue, kind, payload) {picked_events})
    SELECT * FROM claimed ORDER BY priority, created_at, job_id
"""


def jobs_claim_limited(*, queue: str, limit: int, worker_id: str) -> list[ClaimedJob]:
    """Claim like ``jobs_claim``, within the queue's limits (``Queue.max_running``, ``rate_limit``).

    One short transaction: lock the queue's row, which serialises the claims of this queue
    (only), then claim in a statement whose snapshot, taken after the lock, counts every
    running job and start of the claims before it: no two workers can spend one budget. A
    queue without limits (they were just cleared) gets the ordinary claim.
    """
    params = {**claim_params(queue=queue, limit=limit), "worker": worker_id}
    with transaction.atomic():
        limited = sql.rows(
            "SELECT max_running IS NOT NULL OR rate_limit IS NOT NULL FROM dl_queues WHERE name = %(queue)s FOR UPDATE",
            params,
        )
        if not (limited and limited[0][0]):
            return jobs_claim(queue=queue, limit=limit, worker_id=worker_id)
        rows = sql.rows(
            LIMITED_CLAIM.format(
                queued=QUEUED_SQL,
                running=RUNNING_SQL,
                key_free=KEY_FREE.format(key="w.lock_key"),
                first_of_key=FIRST_OF_KEY,
                still_queued=STILL_QUEUED,
                claim_set=CLAIM_SET,
                claimed_columns=CLAIMED_COLUMNS,
                picked_events=PICKED_EVENTS,
            ),
            params,
        )
    return [claimed_job(row) for row in rows]


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
            f"""
            SELECT job_id FROM dl_jobs WHERE status = {QUEUED_SQL} AND queue = %(queue)s AND available_at <= now()
            ORDER BY priority, created_at LIMIT %(limit)s FOR UPDATE SKIP LOCKED
            """,
            {"queue": queue, "limit": limit},
        )
        for (job_id,) in candidates:
            savepoint = transaction.savepoint_create()
            try:
                sql.execute(f"UPDATE dl_jobs j SET {CLAIM_SET} WHERE j.job_id = %(job_id)s", {"job_id": job_id})
            except IntegrityError as exc:
                if not is_lock_key_race(exc):
                    refused[job_id] = first_line(exc)
            except DatabaseError as exc:
                refused[job_id] = first_line(exc)
            finally:
                transaction.savepoint_rollback(savepoint)
        if refused:
            sql.execute(
                f"""
                WITH refused AS (SELECT * FROM unnest(%(job_ids)s::uuid[], %(reasons)s::text[]) AS r(job_id, reason)),
                failed AS (
                    UPDATE dl_jobs j
                    SET status = {FAILED_SQL}, finished_at = now(), error = 'The database refused to run this job: ' || r.reason
                    FROM refused r WHERE j.job_id = r.job_id
                    RETURNING j.job_id, j.queue, r.reason
                )
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT job_id, queue, {sql_literal(EventKind.FAILED)}, jsonb_build_object('reason', 'unclaimable', 'error', reason, 'worker', %(worker)s::text)
                FROM failed
                """,
                {
                    "job_ids": list(refused),
                    "reasons": [storable_text(reason)[:1000] for reason in refused.values()],
                    "worker": worker_id,
                },
            )
    return list(refused)


def is_lock_key_race(exc: IntegrityError) -> bool:
    """A claim that lost the race for a lock_key to another worker's claim (harmless: claim again)."""
    return getattr(getattr(exc.__cause__, "diag", None), "constraint_name", None) == "ux_dl_jobs_running_lock_key"
