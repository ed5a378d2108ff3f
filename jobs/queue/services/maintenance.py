"""Housekeeping: expired leases, retention, the registry of workers, periodic tasks."""

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

import pipeline_project
from jobs.queue import throughput
from jobs.queue.models import JOB_COUNTS
from jobs.queue.services.leases import RUNNING_PICKED_BY
from jobs.queue.states import LOST_SQL, QUEUED_SQL, RUNNING_SQL, EventKind, sql_literal
from jobs.runtime.names import worker_name, worker_session_key
from pipeline_project.db import sql
from pipeline_project.db.connections import apart_from_this_transaction

REAP_BATCH = 1000
# Any constant: the first key of the periodic tasks' advisory locks (the second is the task's name).
PERIODIC_LOCK_SPACE = 0x646C7074  # "dlpt"


@dataclass(frozen=True)
class Reaped:
    requeued: int
    lost: int


def jobs_reap(*, batch: int = REAP_BATCH) -> Reaped:
    """Return expired leases to their queue; jobs with no attempts left become ``lost``.

    Concurrent reapers are safe (``SKIP LOCKED``); the periodic task that calls this makes
    sure only one process does at a time anyway.
    """
    expired = f"""
        SELECT job_id FROM dl_jobs
        WHERE status = {RUNNING_SQL} AND lease_expires_at IS NOT NULL AND lease_expires_at < now()
        ORDER BY lease_expires_at
        LIMIT %(batch)s
        FOR UPDATE SKIP LOCKED
    """
    return _leases_end(
        expired, {"batch": batch}, reason="lease_expired", error="lease expired: the worker stopped heartbeating"
    )


def _leases_end(selected: str, params: dict, *, reason: str, error: str) -> Reaped:
    """End the leases of the running jobs ``selected`` (locked) picks: each goes back to its queue,
    or becomes ``lost`` with no attempts left; its journal says ``reason``."""
    rows = sql.rows(
        f"""
        WITH selected AS MATERIALIZED ({selected}),
        reaped AS (
            UPDATE dl_jobs j
            SET status = CASE WHEN j.attempt >= j.max_attempts THEN {LOST_SQL} ELSE {QUEUED_SQL} END::dl_status,
                available_at = now(), lease_expires_at = NULL,
                finished_at = CASE WHEN j.attempt >= j.max_attempts THEN now() END,
                error = %(error)s
            FROM selected WHERE j.job_id = selected.job_id
            RETURNING j.job_id, j.queue, j.status, j.attempt, j.heartbeat_at
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, CASE status WHEN {LOST_SQL} THEN {sql_literal(EventKind.LOST)} ELSE 'requeue' END,
                   jsonb_build_object('reason', %(reason)s::text, 'attempt', attempt, 'last_heartbeat_at', heartbeat_at)
            FROM reaped
        )
        SELECT count(*) FILTER (WHERE status = {QUEUED_SQL}), count(*) FILTER (WHERE status = {LOST_SQL}) FROM reaped
        """,
        {**params, "reason": reason, "error": error},
    )
    requeued, lost = rows[0]
    return Reaped(requeued=requeued, lost=lost)


RETENTION_BATCH = 2000  # jobs a statement deletes (with their events): well under a second


def jobs_prune(
    *,
    older_than_sec: float,
    max_identical: int,
    finished_within_sec: float,
    budget_sec: float,
    batch: int = RETENTION_BATCH,
) -> int:
    """Retention: delete finished jobs older than the age limit, and beyond the newest
    ``max_identical`` finished jobs of one signature (queue, task, args), as seed 003's
    ``maxIdentical``. Their events go with them (ON DELETE CASCADE). Returns how many.

    Batch after batch, each its own transaction (apart from the periodic task's: no lock or
    snapshot held across batches), until both rules find less
    than a batch or ``budget_sec`` has passed (the next run goes on). A signature is checked when
    one of its jobs finished within ``finished_within_sec``: the only moment it can grow crowded.
    """
    deadline = time.monotonic() + budget_sec

    def batches() -> int:
        pruned = 0
        for statement, params in (
            (_PRUNE_AGED, {"age": older_than_sec, "batch": batch}),
            (_PRUNE_IDENTICAL, {"within": finished_within_sec, "keep": max_identical, "batch": batch}),
        ):
            while time.monotonic() < deadline:
                [(deleted,)] = sql.rows(statement, params)
                pruned += deleted
                if deleted < batch:
                    break
        return pruned

    return apart_from_this_transaction(batches)


_PRUNE_AGED = """
    WITH pruned AS (
        DELETE FROM dl_jobs WHERE job_id = ANY(ARRAY(
            SELECT job_id FROM dl_jobs
            WHERE finished_at IS NOT NULL AND finished_at < now() - make_interval(secs => %(age)s)
            ORDER BY finished_at
            LIMIT %(batch)s
        ))
        RETURNING 1
    )
    SELECT count(*) FROM pruned
"""

# Each signature's finished jobs newest first, off ix_dl_jobs_signature: past the newest ``keep``.
_PRUNE_IDENTICAL = """
    WITH recent AS (
        SELECT DISTINCT task, queue, md5(args::text) AS args_md5 FROM dl_jobs
        WHERE finished_at IS NOT NULL AND finished_at >= now() - make_interval(secs => %(within)s)
    ),
    pruned AS (
        DELETE FROM dl_jobs WHERE job_id = ANY(ARRAY(
            SELECT surplus.job_id FROM recent CROSS JOIN LATERAL (
                SELECT j.job_id FROM dl_jobs j
                WHERE j.task = recent.task AND j.queue = recent.queue AND md5(j.args::text) = recent.args_md5
                  AND j.finished_at IS NOT NULL
                ORDER BY j.finished_at DESC
                OFFSET %(keep)s
            ) surplus
            LIMIT %(batch)s
        ))
        RETURNING 1
    )
    SELECT count(*) FROM pruned
"""


# --- the worker registry -----------------------------------------------------------------


def worker_register(*, worker_id: uuid.UUID, hostname: str, pid: int, queues: dict[str, int]) -> None:
    sql.execute(
        "INSERT INTO dl_workers (worker_id, hostname, pid, queues, running_jobs, version) "
        "VALUES (%(worker_id)s, %(hostname)s, %(pid)s, %(queues)s::jsonb, 0, %(version)s)",
        {
            "worker_id": worker_id,
            "hostname": hostname,
            "pid": pid,
            "queues": json.dumps(queues),
            "version": pipeline_project.__version__,
        },
    )


def worker_heartbeat(*, worker_id: uuid.UUID, running_jobs: int) -> None:
    sql.execute(
        "UPDATE dl_workers SET heartbeat_at = now(), running_jobs = %(running_jobs)s WHERE worker_id = %(worker_id)s",
        {"running_jobs": running_jobs, "worker_id": worker_id},
    )


def worker_deregister(*, worker_id: uuid.UUID) -> None:
    sql.execute("DELETE FROM dl_workers WHERE worker_id = %(worker_id)s", {"worker_id": worker_id})


def workers_prune(*, silent_for_sec: float) -> int:
    """Forget workers that stopped heartbeating (killed processes leave their row behind). Their
    jobs are left to their leases: a worker starved of connections is silent too, and alive."""
    rows = sql.rows(
        "WITH gone AS (DELETE FROM dl_workers WHERE heartbeat_at < now() - make_interval(secs => %(silent_for)s) "
        "RETURNING 1) SELECT count(*) FROM gone",
        {"silent_for": silent_for_sec},
    )
    return rows[0][0]


def workers_without_session(*, server_up_for_sec: float) -> list[tuple[uuid.UUID, datetime, datetime]]:
    """``(worker_id, heartbeat_at, now)`` of the registered workers whose listening session is
    not open (it holds ``jobs.runtime.database.worker_session_key``): their process may be gone,
    since its connections go with it. None while the server has been up less than
    ``server_up_for_sec``: after a restart, live workers are still connecting again."""
    workers = sql.rows(
        "SELECT worker_id, heartbeat_at, now() FROM dl_workers "
        "WHERE pg_postmaster_start_time() < now() - make_interval(secs => %(up)s)",
        {"up": server_up_for_sec},
    )
    if not workers:
        return []
    held = {
        (classid << 32 | objid) - (1 << 64 if classid >= 1 << 31 else 0)  # the bigint key, signed
        for classid, objid in sql.rows(
            "SELECT classid::bigint, objid::bigint FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
        )
    }
    return [(worker_id, beat, now) for worker_id, beat, now in workers if worker_session_key(worker_id) not in held]


@transaction.atomic
def workers_gone(*, worker_ids: list[uuid.UUID]) -> Reaped:
    """Forget workers known to be gone, and put the running jobs each of them picked last back in
    their queue now (the running jobs are few; each one's newest ``picked`` event names its
    worker), not when their leases would have run out: journaled as ``worker_gone``."""
    gone = sql.rows(
        "DELETE FROM dl_workers WHERE worker_id = ANY(%(worker_ids)s) RETURNING worker_id, hostname, pid",
        {"worker_ids": worker_ids},
    )
    if not gone:
        return Reaped(requeued=0, lost=0)
    orphaned = f"SELECT j.job_id FROM {RUNNING_PICKED_BY} FOR UPDATE OF j SKIP LOCKED"
    names = [worker_name(worker_id, hostname=hostname, pid=pid) for worker_id, hostname, pid in gone]
    return _leases_end(
        orphaned, {"names": names}, reason="worker_gone", error="the worker is gone: its process ended during this run"
    )


# --- periodic tasks ----------------------------------------------------------------------


@dataclass(frozen=True)
class PeriodicRun:
    ran: bool
    due_in_sec: float  # when the task is next due, as far as this process can tell
    result: dict | None = None


def periodic_task_run(*, name: str, period_sec: float, runner: str, work: Callable[[], dict]) -> PeriodicRun:
    """Run ``work`` unless another process runs task ``name`` now or ran it within ``period_sec``.

    One transaction holds a transaction-scoped advisory lock on the name while ``work``
    runs (no session state: safe behind a transaction pooler, released if the process
    dies), and the task's row records the start, so the task runs once per period across
    every process. If ``work`` raises, nothing is recorded and the next try may run it.
    """
    with transaction.atomic():
        if not sql.rows(
            "SELECT pg_try_advisory_xact_lock(%(lock_space)s, hashtext(%(name)s))",
            {"lock_space": PERIODIC_LOCK_SPACE, "name": name},
        )[0][0]:
            return PeriodicRun(ran=False, due_in_sec=period_sec)
        since_last = sql.rows(
            """
            INSERT INTO dl_periodic_tasks (name, last_runner, last_result) VALUES (%(name)s, '', '{}')
            ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name
            RETURNING extract(epoch FROM now() - last_started_at)::float8
            """,
            {"name": name},
        )[0][0]
        if since_last is not None and since_last < period_sec:
            return PeriodicRun(ran=False, due_in_sec=period_sec - since_last)
        result = work()
        sql.execute(
            """
            UPDATE dl_periodic_tasks
            SET last_started_at = now(), last_finished_at = clock_timestamp(), last_runner = %(runner)s,
                last_result = %(result)s::jsonb
            WHERE name = %(name)s
            """,
            {"runner": runner, "result": json.dumps(result), "name": name},
        )
    return PeriodicRun(ran=True, due_in_sec=period_sec, result=result)


# The claim's probes (is a job of this key queued before it, does a running job hold its key) each
# have one right index, and a planner that believes almost no job is queued (statistics taken
# while the queue was empty) picks a smaller wrong one and filters thousands of rows per probe:
# ten times the statement's cost, in every plan made until the next ANALYZE (behind a pooler,
# every statement is planned anew). How many queued jobs may exist before that matters, and how
# far the planner's estimate may be below the truth.
STATISTICS_MIN_QUEUED = 1000
STATISTICS_DRIFT = 10
STATISTICS_MIN_PAGES = 32  # 256 KB: about a thousand jobs


def jobs_statistics_refresh(
    *, min_queued: int = STATISTICS_MIN_QUEUED, drift: float = STATISTICS_DRIFT, min_pages: int = STATISTICS_MIN_PAGES
) -> bool:
    """ANALYZE dl_jobs when the planner's picture of it is far behind: when the table has grown
    ``drift``-fold since the planner last measured it (``pg_class.relpages``: 0 if never), to at least
    ``min_pages``; or when at least ``min_queued`` jobs are queued and the planner believes in fewer
    than one ``drift``-th of them (a burst on a queue that was empty when last analyzed). Counts at
    most ``min_queued × drift`` jobs, through the queue's partial indexes.

    The workers' generic plans are made once per connection, and again only after the table's
    statistics change. Made while it held a few pages, every index costs the same, and joins by
    job_id had walked a whole index (``ix_dl_jobs_lock_key_job``) for each job: result writes of a
    second, 20 s after a table analyzed empty took 1,000 jobs/s (bench/chaos.py)."""
    measured_pages, pages_now = sql.rows(
        "SELECT relpages, pg_relation_size(oid) / current_setting('block_size')::int FROM pg_class "
        "WHERE oid = 'dl_jobs'::regclass",
        {},
    )[0]
    if pages_now < max(min_pages, drift * measured_pages):
        cap = int(min_queued * drift)
        queued = sql.rows(
            f"SELECT count(*) FROM (SELECT 1 FROM dl_jobs WHERE status = {QUEUED_SQL} LIMIT %(cap)s) AS q", {"cap": cap}
        )[0][0]
        if queued < min_queued:
            return False
        plan = sql.rows(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM dl_jobs WHERE status = {QUEUED_SQL}", {})[0][0]
        if sql.json_value(plan)[0]["Plan"]["Plan Rows"] * drift >= queued:
            return False
    sql.execute("ANALYZE dl_jobs", {})
    return True


def job_counts_fold() -> dict:
    """Fold the rows dl_jobs' triggers appended to dl_job_counts into one per queue, task and status."""
    return JOB_COUNTS.compact()


def job_throughput_fold() -> dict:
    """Fold the rows dl_jobs' triggers appended to dl_job_throughput into one per queue, status and minute."""
    return throughput.fold()


def job_throughput_age(*, retention_days: float) -> dict:
    """Fold dl_job_throughput's minutes older than two days into hours; drop its rows older than ``retention_days``."""
    return throughput.age(retention_days=retention_days)


def jobs_vacuum(*, min_dead_rows: int) -> int:
    """VACUUM dl_jobs once it holds at least ``min_dead_rows`` dead row versions; return how many
    it held (0: no vacuum).

    Every claim reads its queue's claim-order index from the head, where each job claimed since
    the last vacuum leaves an entry that no longer matches: under a steady 2,850 jobs/s, the
    claim's first row cost 0.47 → 1.12 ms in 90 s. Autovacuum, where it is on, waits for a
    fifth of the table (days of retained jobs). VACUUM cannot run in a transaction: it runs
    apart from the periodic task's. ``SKIP_LOCKED``: one already running (autovacuum's) will do.
    ``TRUNCATE false``: giving the empty tail back takes an ACCESS EXCLUSIVE lock, which stops
    every claim and result while it is held (the tables' ``vacuum_truncate`` says so to autovacuum).
    """
    [(dead,)] = sql.rows(
        "SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables WHERE relid = 'dl_jobs'::regclass", {}
    ) or [(0,)]
    if dead < min_dead_rows:
        return 0
    apart_from_this_transaction(lambda: sql.execute("VACUUM (SKIP_LOCKED, TRUNCATE false) dl_jobs", {}))
    return dead
