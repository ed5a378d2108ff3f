"""Operators: cancel, retry and delete jobs (one, or every job a filter matches, with a count
preview), pause and resume queues, set their limits.

One statement per action, whatever the number of jobs, each job changed with its journal
row. The jobs are a :class:`Selection`: ids, or the SQL of a queryset (the admin's or the
API's filters), so a filter matching 100,000 jobs is one statement, not 100,000.
"""

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from jobs.queue.models import CANCEL_CHANNEL, Job, Queue, QueueStart
from jobs.queue.services.dependencies import ORPHANS_CANCEL_CTES
from jobs.queue.states import (
    CANCELED_SQL,
    LIVE_SQL,
    QUEUED_SQL,
    RETRYABLE_SQL,
    RUNNING_SQL,
    EventKind,
    JobStatus,
    sql_literal,
)
from pipeline_project.api.errors import ConflictError, NotFoundError
from pipeline_project.db import sql


@dataclass(frozen=True)
class Selection:
    """Jobs to act on, as a subquery of job ids and its named parameters (``%(name)s``).

    Positional parameters (``%s``, as Django compiles a queryset) are named on the way in, so
    the statements that embed the subquery add named parameters of their own.
    """

    sql: str
    params: Mapping | Sequence = ()

    def __post_init__(self):
        if not isinstance(self.params, Mapping):
            text, params = _named_parameters(self.sql, self.params)
            object.__setattr__(self, "sql", text)
            object.__setattr__(self, "params", params)

    @classmethod
    def of_ids(cls, job_ids) -> "Selection":
        return cls("SELECT unnest(%(selection_ids)s::uuid[])", {"selection_ids": [*job_ids]})

    @classmethod
    def of_queryset(cls, queryset: QuerySet) -> "Selection":
        return cls(*queryset.order_by().values("job_id").query.sql_with_params())


def _named_parameters(text: str, params: Sequence) -> tuple[str, dict]:
    """``text`` with its ``%s`` placeholders named ``selection_0``, ``selection_1``... (``%%`` stays)."""
    names = iter(range(len(params)))

    def name(match: re.Match) -> str:
        return match.group() if match.group() == "%%" else f"%(selection_{next(names)})s"

    return re.sub(r"%%|%s", name, text), {f"selection_{index}": value for index, value in enumerate(params)}


@dataclass(frozen=True)
class Counts:
    """What an action did (or, in a dry run, would do): ``matched`` jobs, and per effect."""

    matched: int
    changed: int  # retried, canceled (queued ones) or deleted
    requested: int = 0  # cancel: running jobs asked to stop
    skipped: int = 0  # matched but left alone: not in a state the action applies to
    dry_run: bool = False


_INT_MAX = 2**31 - 1
# A number the last retry's journal row gives (run 1, from attempt 1, when there is none),
# bounded: a row written by hand cannot make the statement fail.
_RUN_FIELD = (
    "COALESCE(CASE WHEN jsonb_typeof(last_retry.payload -> '{field}') = 'number' "
    f"THEN LEAST(GREATEST((last_retry.payload ->> '{{field}}')::numeric, 1), {_INT_MAX - 1})::int END, 1)"
)


# For each job of ``target``: the run its last operator retry started and that run's first attempt
# (run 1 from attempt 1 when it was never retried), what a retry continues from; and the
# max_attempts a retry gives it: its attempts so far and one more run of the size its runs have.
_LAST_RUN = f"""
    previous AS MATERIALIZED (
        SELECT t.job_id, {_RUN_FIELD.format(field="run")} AS run,
               {_RUN_FIELD.format(field="first_attempt")} AS first_attempt
        FROM target t LEFT JOIN LATERAL (
            SELECT e.payload FROM dl_job_events e
            WHERE e.job_id = t.job_id AND e.kind = 'requeue' AND e.payload ->> 'reason' = 'retry_requested'
            ORDER BY e.event_id DESC LIMIT 1
        ) AS last_retry ON true
    )"""
_RETRIED_MAX_ATTEMPTS = f"LEAST(j.attempt::bigint + GREATEST(j.max_attempts - p.first_attempt + 1, 0), {_INT_MAX})"


def jobs_retry(*, selection: Selection, by: str, dry_run: bool = False) -> Counts:
    """Put failed, canceled and lost jobs back in their queue for a new run.

    Attempt numbers go on (a job that failed at attempt 5 runs attempt 6 next), so every
    attempt's events, error and wait stay its own; the run gets the attempts the job's runs
    have (``max_attempts`` rises by them). The journal row says which run it starts and its
    first attempt, so the next retry knows the runs' size whatever happened in between.
    (``job_retry_preview`` says what it would do to one job.)
    """
    if dry_run:
        return _preview(selection, changed=f"status IN {RETRYABLE_SQL}")
    matched, changed = sql.rows(
        f"""
        WITH target AS MATERIALIZED (SELECT job_id FROM dl_jobs WHERE job_id IN ({selection.sql})),
        {_LAST_RUN},
        retried AS (
            UPDATE dl_jobs j
            SET status = {QUEUED_SQL}, available_at = now(), cancel_requested = false,
                max_attempts = {_RETRIED_MAX_ATTEMPTS},
                started_at = NULL, finished_at = NULL, heartbeat_at = NULL, lease_expires_at = NULL, error = NULL
            FROM previous p
            WHERE j.job_id = p.job_id AND j.status IN {RETRYABLE_SQL}
            RETURNING j.job_id, j.queue, j.attempt, j.max_attempts, p.run
        ),
        journal AS (
            INSERT INTO dl_job_events (job_id, queue, kind, payload)
            SELECT job_id, queue, 'requeue',
                   jsonb_build_object('reason', 'retry_requested', 'by', %(by)s::text, 'run', run + 1,
                                      'first_attempt', attempt + 1, 'max_attempts', max_attempts)
            FROM retried
        )
        SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM retried)
        """,
        {**selection.params, "by": by},
    )[0]
    return Counts(matched=matched, changed=changed, skipped=matched - changed)


@dataclass(frozen=True)
class RetryPreview:
    """What ``jobs_retry`` would do to one job: the run it starts, that run's first attempt (attempt
    numbers go on across runs), and its max_attempts before and after."""

    run: int
    first_attempt: int
    max_attempts_before: int
    max_attempts: int

    @property
    def attempts(self) -> int:
        """The new run's attempts."""
        return self.max_attempts - self.first_attempt + 1


def job_retry_preview(*, job_id: uuid.UUID) -> RetryPreview | None:
    """What retrying the job would do (None: there is no such job), by the retry's own reading."""
    rows = sql.rows(
        f"""
        WITH target AS MATERIALIZED (SELECT job_id FROM dl_jobs WHERE job_id = %(job_id)s),
        {_LAST_RUN}
        SELECT p.run + 1, j.attempt + 1, j.max_attempts, {_RETRIED_MAX_ATTEMPTS}
        FROM dl_jobs j JOIN previous p ON p.job_id = j.job_id
        """,
        {"job_id": job_id},
    )
    return RetryPreview(*rows[0]) if rows else None


def jobs_cancel(*, selection: Selection, by: str, dry_run: bool = False) -> Counts:
    """Cancel queued jobs at once and ask running ones to stop (their workers hear it by
    NOTIFY at once, or at their next lease renewal); finished jobs are left alone."""
    if dry_run:
        return _preview(selection, changed=f"status = {QUEUED_SQL}", requested=f"status = {RUNNING_SQL}")
    with transaction.atomic():
        matched, canceled, requested = sql.rows(
            f"""
            WITH target AS MATERIALIZED (
                SELECT job_id, status FROM dl_jobs
                WHERE job_id IN ({selection.sql})
                ORDER BY job_id
            ),
            -- Locked, so a claim cannot move a queued job to running under this statement.
            live AS MATERIALIZED (
                SELECT job_id, status FROM dl_jobs
                WHERE job_id IN (SELECT job_id FROM target) AND status IN {LIVE_SQL}
                ORDER BY job_id
                FOR NO KEY UPDATE
            ),
            canceled AS (
                UPDATE dl_jobs
                SET status = {CANCELED_SQL}, cancel_requested = true, finished_at = now(), lease_expires_at = NULL
                WHERE job_id IN (SELECT job_id FROM live WHERE status = {QUEUED_SQL})
                RETURNING job_id, queue
            ),
            requested AS (
                UPDATE dl_jobs SET cancel_requested = true
                WHERE job_id IN (SELECT job_id FROM live WHERE status = {RUNNING_SQL})
                RETURNING job_id, pg_notify('{CANCEL_CHANNEL}', job_id::text)
            ),
            journal AS (
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT job_id, queue, {sql_literal(EventKind.CANCELED)}, jsonb_build_object('by', %(by)s::text, 'while', {QUEUED_SQL}) FROM canceled
            )
            SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM canceled), (SELECT count(*) FROM requested)
            """,
            {**selection.params, "by": by},
        )[0]
    return Counts(matched=matched, changed=canceled, requested=requested, skipped=matched - canceled - requested)


def jobs_delete(*, selection: Selection, force: bool = False, dry_run: bool = False) -> Counts:
    """Delete jobs and their journals; running jobs only with ``force`` (their workers' writes
    then match nothing). Jobs waiting for a deleted job are canceled, naming it."""
    deletable = "true" if force else f"status <> {RUNNING_SQL}"
    if dry_run:
        return _preview(selection, changed=deletable)
    matched, deleted = sql.rows(
        f"""
        WITH target AS MATERIALIZED (
            SELECT job_id, status FROM dl_jobs WHERE job_id IN ({selection.sql}) ORDER BY job_id FOR UPDATE
        ),
        {ORPHANS_CANCEL_CTES.format(deletable=deletable)},
        gone AS (DELETE FROM dl_jobs WHERE job_id IN (SELECT job_id FROM target WHERE {deletable}) RETURNING job_id)
        SELECT (SELECT count(*) FROM target), (SELECT count(*) FROM gone)
        """,
        selection.params,
    )[0]
    return Counts(matched=matched, changed=deleted, skipped=matched - deleted)


def _preview(selection: Selection, *, changed: str, requested: str = "false") -> Counts:
    matched, would_change, would_request = sql.rows(
        f"""
        SELECT count(*), count(*) FILTER (WHERE {changed}), count(*) FILTER (WHERE {requested})
        FROM dl_jobs WHERE job_id IN ({selection.sql})
        """,
        selection.params,
    )[0]
    return Counts(
        matched=matched,
        changed=would_change,
        requested=would_request,
        skipped=matched - would_change - would_request,
        dry_run=True,
    )


# --- one job -------------------------------------------------------------------------------


def job_cancel(*, job_id: uuid.UUID, requested_by: str = "api") -> str:
    """Cancel a job: a queued job at once, a running one cooperatively; return its status.

    Finished jobs answer a conflict, except a canceled one (a repeat is harmless).
    """
    counts = jobs_cancel(selection=Selection.of_ids([job_id]), by=requested_by)
    if counts.changed:
        return JobStatus.CANCELED
    if counts.requested:
        return JobStatus.RUNNING
    status = _status(job_id)
    if status == JobStatus.CANCELED:
        return status
    raise ConflictError(
        f"Job {job_id} is already {status}.", code="job_finished", details={"job_id": str(job_id), "status": status}
    )


def job_retry(*, job_id: uuid.UUID, requested_by: str = "admin") -> bool:
    """Put a failed, canceled or lost job back in its queue for a new run (see ``jobs_retry``)."""
    return bool(jobs_retry(selection=Selection.of_ids([job_id]), by=requested_by).changed)


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
        rows = sql.rows(
            "SELECT status::text, (SELECT count(*) FROM dl_job_events WHERE job_id = %(job_id)s) FROM dl_jobs "
            "WHERE job_id = %(job_id)s FOR UPDATE",
            {"job_id": job_id},
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
            jobs_delete(selection=Selection.of_ids([job_id]), force=force)
    return Deletion(job_id=job_id, status=status, events=events, deleted=not dry_run, dry_run=dry_run)


def _status(job_id: uuid.UUID) -> str:
    rows = sql.rows("SELECT status::text FROM dl_jobs WHERE job_id = %(job_id)s", {"job_id": job_id})
    if not rows:
        raise NotFoundError(f"No job {job_id}.", details={"job_id": str(job_id)})
    return rows[0][0]


def queues_delete(*, queues: Sequence[str]) -> int:
    """Delete every job of ``queues``, running or not, with their journals and dependencies, and the
    queues' operator state (pause, limits, start counts); how many jobs were deleted."""
    with transaction.atomic():
        deleted = jobs_delete(selection=Selection.of_queryset(Job.objects.filter(queue__in=queues)), force=True)
        Queue.objects.filter(name__in=queues).delete()
        QueueStart.objects.filter(queue__in=queues).delete()
    return deleted.changed
