"""The queue's states: every status a ``dl_jobs`` row can be in, who moves a job between them,
and the sets and SQL fragments every service, selector and trigger function builds on.

The statuses are the seed's ``dl_status`` enum, in its order. One more state is not a status:
*waiting*, a queued job that waits for other jobs (``available_at`` = :data:`WAITING_AVAILABLE_AT`,
so no claim reaches it), shown as "waiting" by pages and the API (:func:`shown_status`). The
console splits the other queued jobs by when they are due (:func:`shown_state`).

queued
    In its queue, to be claimed once ``available_at`` comes (now, later, or never while it waits).
    In: a producer enqueues it; an outcome retries it after an error (attempts left); the reaper
    finds its lease expired (attempts left); its worker gives it back (shutdown, a lost claim);
    an operator retries it; dependencies bring it back when the upstream job that canceled it
    is retried. Out: a claim (running), the claim's set-aside of a job the database refuses
    (failed), an operator's cancel or its dependencies (canceled).
running
    Claimed by a worker under a lease (attempt, started_at; renewed by heartbeats). In: a claim.
    Out: the run's outcome (succeeded, queued for a retry, failed, canceled when the handler
    stopped at a cancel request), the reaper at lease expiry (queued, or lost with no attempts
    left), the worker giving it back (queued). An operator's cancel only asks it to stop.
succeeded
    Finished: the handler returned. In: an outcome. Final.
failed
    Finished: the handler failed with no attempts left, failed fatally, or the database refused
    to claim it. In: an outcome, the claim's set-aside. Out: an operator's retry.
canceled
    Finished: canceled while queued (an operator; dependencies: an upstream job ended badly or
    was deleted), or stopped while running at a cancel request. Out: an operator's retry;
    dependencies, when the upstream job that canceled it is retried.
lost
    Finished: its lease expired with no attempts left (its worker vanished). In: the reaper.
    Out: an operator's retry.

:data:`TRANSITIONS` holds these moves as data; the services' statements take their source and
target statuses from it, and ``tests/jobs/queue/test_states.py`` checks that no queue module
spells a status itself.
"""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db import models


class JobStatus(models.TextChoices):
    """``dl_status``, in the enum's order (the SQL lists below follow it)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELED = "canceled"
    LOST = "lost"


class EventKind(models.TextChoices):
    """The kinds of ``dl_job_events`` rows: what each transition writes to the journal (and heartbeats)."""

    QUEUED = "queued"
    PICKED = "picked"
    HEARTBEAT = "heartbeat"
    REQUEUE = "requeue"
    DONE = "done"
    FAILED = "failed"
    CANCELED = "canceled"
    LOST = "lost"


class OutcomeKind(models.TextChoices):
    """How a run ended (``services.outcomes.Outcome.kind``), and the transition each makes."""

    SUCCEEDED = JobStatus.SUCCEEDED.value  # "succeed"
    ERROR = "error"  # "retry_after_error" while attempts remain, else "fail"
    FATAL = "fatal"  # "fail"
    CANCELED = JobStatus.CANCELED.value  # "stop": the handler stopped at a cancel request


# A job waiting for others: far enough for any claim never to reach, near enough for Python
# datetimes to load in any time zone. Shown as WAITING.
WAITING = "waiting"
WAITING_AVAILABLE_AT = datetime(9999, 12, 31, tzinfo=UTC)
WAITING_SQL = "'9999-12-31 00:00:00+00'::timestamptz"  # the same, in SQL text

# Who moves jobs: a producer (enqueue), the claim, a run's outcome, the worker that holds the
# run, the reaper (expired leases, vanished workers), an operator, and the database's
# dependency rules (``jobs.queue.dependency_rules``).
PRODUCER, CLAIM, OUTCOME, WORKER, REAPER, OPERATOR, DEPENDENCIES = (
    "producer",
    "claim",
    "outcome",
    "worker",
    "reaper",
    "operator",
    "dependencies",
)


@dataclass(frozen=True)
class JobTransition:
    """A move to ``target`` from any of ``sources`` (none: the job is new), made by ``by``, journaled as ``event``."""

    target: JobStatus
    sources: frozenset[JobStatus]
    by: str
    event: EventKind


S = JobStatus
TRANSITIONS: dict[str, JobTransition] = {
    "enqueue": JobTransition(S.QUEUED, frozenset(), PRODUCER, EventKind.QUEUED),
    "claim": JobTransition(S.RUNNING, frozenset({S.QUEUED}), CLAIM, EventKind.PICKED),
    # A job the database refuses to claim (``claims.jobs_set_aside_unclaimable``).
    "set_aside": JobTransition(S.FAILED, frozenset({S.QUEUED}), CLAIM, EventKind.FAILED),
    "succeed": JobTransition(S.SUCCEEDED, frozenset({S.RUNNING}), OUTCOME, EventKind.DONE),
    "retry_after_error": JobTransition(S.QUEUED, frozenset({S.RUNNING}), OUTCOME, EventKind.REQUEUE),
    "fail": JobTransition(S.FAILED, frozenset({S.RUNNING}), OUTCOME, EventKind.FAILED),
    "stop": JobTransition(S.CANCELED, frozenset({S.RUNNING}), OUTCOME, EventKind.CANCELED),
    # Runs its worker gives back (shutdown, a claim whose answer was lost): the attempt is returned.
    "release": JobTransition(S.QUEUED, frozenset({S.RUNNING}), WORKER, EventKind.REQUEUE),
    "reap": JobTransition(S.QUEUED, frozenset({S.RUNNING}), REAPER, EventKind.REQUEUE),
    "reap_lost": JobTransition(S.LOST, frozenset({S.RUNNING}), REAPER, EventKind.LOST),
    # A running job's cancel sets cancel_requested only: its run ends by "stop" (or any outcome).
    "cancel": JobTransition(S.CANCELED, frozenset({S.QUEUED}), OPERATOR, EventKind.CANCELED),
    "retry": JobTransition(S.QUEUED, frozenset({S.FAILED, S.CANCELED, S.LOST}), OPERATOR, EventKind.REQUEUE),
    # An upstream job failed, was canceled, lost or deleted (and the job has no run_anyway).
    "upstream_cancel": JobTransition(S.CANCELED, frozenset({S.QUEUED}), DEPENDENCIES, EventKind.CANCELED),
    # The upstream job whose end canceled it was retried: it waits again.
    "upstream_retried": JobTransition(S.QUEUED, frozenset({S.CANCELED}), DEPENDENCIES, EventKind.QUEUED),
}
del S


def allowed(source: str | None, target: str) -> bool:
    """Whether some transition moves a job from ``source`` (None: a new job) to ``target``."""
    return any(
        rule.target == target and (source in rule.sources if source is not None else not rule.sources)
        for rule in TRANSITIONS.values()
    )


def ordered(statuses) -> tuple[JobStatus, ...]:
    """``statuses`` in the enum's order."""
    return tuple(status for status in JobStatus if status in statuses)


# The sets. Finished: no worker, claim or reaper moves the job any more (only an operator's
# retry or dependencies do); live: the others.
FINISHED = ordered({JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.LOST})
LIVE = ordered(set(JobStatus) - set(FINISHED))
UNSUCCESSFUL = ordered(set(FINISHED) - {JobStatus.SUCCEEDED})  # what cancels the jobs that wait for it
# The statuses a queue's or a task's list reads through an index of its own (rare in any one of
# them, or none): not succeeded, the common end whose rows a newest-first walk soon finds, nor
# running, a few rows (the fleet's slots) in an index of their own.
LISTED_APART = ordered({JobStatus.QUEUED, *UNSUCCESSFUL})
RETRYABLE = ordered(TRANSITIONS["retry"].sources)
CLAIMABLE = ordered(TRANSITIONS["claim"].sources)
STOPPABLE = ordered(TRANSITIONS["stop"].sources)  # asked to stop by a cancel


# --- SQL fragments -------------------------------------------------------------------------


def sql_literal(value: str) -> str:
    """A status, event kind or outcome kind as an SQL literal: ``'queued'``."""
    if not any(value in kinds.values for kinds in (JobStatus, EventKind, OutcomeKind)):
        raise ValueError(f"{value!r} is not a job status, event kind or outcome kind.")
    return f"'{value}'"


def sql_in(statuses) -> str:
    """An IN-list of statuses in the enum's order: ``('failed', 'canceled', 'lost')``."""
    return "(" + ", ".join(sql_literal(status) for status in ordered(statuses)) + ")"


QUEUED_SQL = sql_literal(JobStatus.QUEUED)
RUNNING_SQL = sql_literal(JobStatus.RUNNING)
SUCCEEDED_SQL = sql_literal(JobStatus.SUCCEEDED)
FAILED_SQL = sql_literal(JobStatus.FAILED)
CANCELED_SQL = sql_literal(JobStatus.CANCELED)
LOST_SQL = sql_literal(JobStatus.LOST)
FINISHED_SQL = sql_in(FINISHED)
LIVE_SQL = sql_in(LIVE)
UNSUCCESSFUL_SQL = sql_in(UNSUCCESSFUL)
RETRYABLE_SQL = sql_in(RETRYABLE)


def is_waiting_sql(alias: str) -> str:
    """The waiting state's predicate on the dl_jobs row ``alias``."""
    return f"{alias}.status = {QUEUED_SQL} AND {alias}.available_at = {WAITING_SQL}"


def shown_status(status: str, available_at) -> str:
    """A job's status as pages and the API show it: WAITING for a queued job that waits for others."""
    return WAITING if status == JobStatus.QUEUED and available_at == WAITING_AVAILABLE_AT else status


# What the console shows of a queued job: AVAILABLE (due now), SCHEDULED (due later, not tried yet),
# AWAITING_RETRY (due later after a failed attempt: a retry's backoff) or WAITING (for other jobs).
AVAILABLE, SCHEDULED, AWAITING_RETRY = "available", "scheduled", "retryable"
QUEUED_STATES = (AVAILABLE, SCHEDULED, AWAITING_RETRY, WAITING)


def shown_state(status: str, available_at, attempt: int, now) -> str:
    """A job's status, a queued one's as one of QUEUED_STATES (due by ``now`` or later)."""
    if status != JobStatus.QUEUED:
        return status
    if available_at >= WAITING_AVAILABLE_AT:
        return WAITING
    if available_at <= now:
        return AVAILABLE
    return AWAITING_RETRY if attempt > 0 else SCHEDULED
