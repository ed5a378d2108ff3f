"""The job list's states: a tab for each, its filter and its count, bounded at any number of jobs.

The states are the statuses, queued split by when a job is due (``states.shown_state``):
available (now), scheduled (later, never tried), retryable (later, after a failed attempt),
waiting (for other jobs). Running and finished jobs are counted from the counts the triggers
keep. Queued ones are read from ``ix_dl_jobs_claim`` (queue, available_at) WHERE queued: three
ranges per queue (due, due later, waiting), each read at most ``COUNTED_AT_MOST`` + 1 entries
deep whatever the backlog; a range read whole is an exact count, one cut short a lower bound
("1,000+"), unless it is the only one: the kept count of queued jobs less the others is exact.
"""

from dataclasses import dataclass

from django.contrib.admin.options import IncorrectLookupParameters
from django.db import transaction
from django.db.models import BooleanField, QuerySet
from django.db.models.expressions import RawSQL

from jobs.queue import selectors
from jobs.queue.models import Job
from jobs.queue.states import (
    AVAILABLE,
    AWAITING_RETRY,
    QUEUED_SQL,
    QUEUED_STATES,
    SCHEDULED,
    WAITING,
    WAITING_AVAILABLE_AT,
    JobStatus,
)
from pipeline_project.db import sql
from pipeline_project.db.counts import sum_matching

COUNTED_AT_MOST = 1_000  # a range of queued jobs read deeper than this shows as "1,000+" (at 1.8 µs an entry)

# The tabs' order: where a job is in its life, the queued states first.
S = JobStatus
STATES = tuple(
    str(state)
    for state in (AVAILABLE, SCHEDULED, WAITING, S.RUNNING, AWAITING_RETRY, S.SUCCEEDED, S.FAILED, S.CANCELED, S.LOST)
)
del S
ALL = "all"


@dataclass(frozen=True)
class Count:
    """A tab's count: exact, or at least ``n`` (a range cut short)."""

    n: int
    exact: bool = True

    def __str__(self) -> str:
        return f"{self.n:,}" if self.exact else f"{min(self.n, COUNTED_AT_MOST):,}+"


# A queued state's jobs: their ids read first from the partial indexes of queued jobs by
# available_at (an InitPlan), then found by primary key and sorted. Spelled as a filter on the
# list's rows, the planner walked the primary key newest first for them instead, past every
# finished job newer than a backlog.
QUEUED_IN = f"dl_jobs.job_id = ANY (ARRAY (SELECT job_id FROM dl_jobs WHERE status = {QUEUED_SQL} AND {{range}}))"
QUEUED_RANGE_OF = {
    AVAILABLE: ("available_at <= now()", []),
    SCHEDULED: ("available_at > now() AND available_at < %s AND attempt = 0", [WAITING_AVAILABLE_AT]),
    AWAITING_RETRY: ("available_at > now() AND available_at < %s AND attempt > 0", [WAITING_AVAILABLE_AT]),
    WAITING: ("available_at >= %s", [WAITING_AVAILABLE_AT]),
}


def state_filter(queryset: QuerySet[Job], state: str) -> QuerySet[Job]:
    """The jobs of ``queryset`` in ``state`` (one of STATES), each read through an index: queued
    ones through the queued jobs' by available_at (due by the transaction's start, as the counts
    read it), the others by status."""
    if state in QUEUED_RANGE_OF:
        condition, params = QUEUED_RANGE_OF[state]
        in_range = RawSQL(QUEUED_IN.format(range=condition), params, output_field=BooleanField())
        return queryset.filter(in_range, status=JobStatus.QUEUED)
    if state in JobStatus.values and state != JobStatus.QUEUED:
        return queryset.filter(status=state)
    raise IncorrectLookupParameters(f"state={state!r} is none of {', '.join(STATES)}")


# Each range of each queue's queued jobs in ix_dl_jobs_claim, read in its order (with sorts off, no
# other index serves it: ix_dl_jobs_status_queue would read all the queue's queued jobs) at most %(read)s
# entries deep (the outer LIMIT stops the walk over the queues too); per range the entries read
# and, among them, the task's (any task without one) not tried yet and tried.
QUEUED_RANGES = f"""
    WITH read AS (
        (SELECT 'due' AS part, w.task, w.attempt FROM unnest(%(queues)s::text[]) AS q(name) CROSS JOIN LATERAL (
            SELECT task, attempt FROM dl_jobs
            WHERE status = {QUEUED_SQL} AND queue = q.name AND available_at <= now()
            ORDER BY available_at LIMIT %(read)s) AS w
         LIMIT %(read)s)
        UNION ALL
        (SELECT 'later', w.task, w.attempt FROM unnest(%(queues)s::text[]) AS q(name) CROSS JOIN LATERAL (
            SELECT task, attempt FROM dl_jobs
            WHERE status = {QUEUED_SQL} AND queue = q.name AND available_at > now() AND available_at < %(waiting)s
            ORDER BY available_at LIMIT %(read)s) AS w
         LIMIT %(read)s)
        UNION ALL
        (SELECT 'waiting', w.task, w.attempt FROM unnest(%(queues)s::text[]) AS q(name) CROSS JOIN LATERAL (
            SELECT task, attempt FROM dl_jobs
            WHERE status = {QUEUED_SQL} AND queue = q.name AND available_at >= %(waiting)s
            ORDER BY available_at LIMIT %(read)s) AS w
         LIMIT %(read)s)
    )
    SELECT part, count(*),
           count(*) FILTER (WHERE attempt = 0 AND (%(task)s::text IS NULL OR task = %(task)s)),
           count(*) FILTER (WHERE attempt > 0 AND (%(task)s::text IS NULL OR task = %(task)s))
    FROM read GROUP BY part
"""


def state_counts(*, queue: str | None = None, task: str | None = None) -> dict[str, Count]:
    """Each state's jobs of ``queue`` and ``task`` (None: any), and "all" of them."""
    rows = selectors.job_counts()
    counts = {state: Count(sum_matching(rows, [queue, task, state])) for state in STATES if state not in QUEUED_STATES}
    counts[ALL] = Count(sum_matching(rows, [queue, task, None]))
    queued = sum_matching(rows, [queue, task, JobStatus.QUEUED])
    queues = sorted(
        {
            name
            for name, of_task, status, n in rows
            if status == JobStatus.QUEUED and n > 0 and queue in (None, name) and task in (None, of_task)
        }
    )
    return {**counts, **_queued_counts(queues, task=task, queued=queued)}


def _queued_counts(queues: list[str], *, task: str | None, queued: int) -> dict[str, Count]:
    """The queued states' counts from the ranges read; ``queued``: the kept count of them all."""
    if not queues:
        return {state: Count(0) for state in QUEUED_STATES}
    params = {"queues": queues, "read": COUNTED_AT_MOST + 1, "waiting": WAITING_AVAILABLE_AT, "task": task}
    # Sorts off for this statement only (as selectors.claimable_depths plans its read of the same
    # index): each range is then read in ix_dl_jobs_claim's order, which no other index gives.
    with transaction.atomic():
        was = sql.rows("SELECT current_setting('enable_sort'), set_config('enable_sort', 'off', true)")[0][0]
        rows = sql.rows(QUEUED_RANGES, params)
        sql.execute("SELECT set_config('enable_sort', %(was)s, true)", {"was": was})
    found = {part: (read, fresh, tried) for part, read, fresh, tried in rows}
    due, later, waiting = (found.get(part, (0, 0, 0)) for part in ("due", "later", "waiting"))
    counts = {
        AVAILABLE: Count(due[1] + due[2], due[0] <= COUNTED_AT_MOST),
        SCHEDULED: Count(later[1], later[0] <= COUNTED_AT_MOST),
        AWAITING_RETRY: Count(later[2], later[0] <= COUNTED_AT_MOST),
        WAITING: Count(waiting[1] + waiting[2], waiting[0] <= COUNTED_AT_MOST),
    }
    cut = [state for state, count in counts.items() if not count.exact]
    if len(cut) == 1:  # the kept count of queued jobs less the exact ones
        counts[cut[0]] = Count(queued - sum(count.n for state, count in counts.items() if state != cut[0]))
    return counts
