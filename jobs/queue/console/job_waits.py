"""Why a queued job has not run yet, in words, for the job's page and the list's rows: when it is
due (a schedule, a retry's backoff), the jobs it waits for, and what holds its queue back: paused,
no live worker serving it, at its limits, its lock key busy.

A queue's pause and its workers hold every queued job of it (the page and the list say so); the
limits and the lock key only a due job, and only the page reads them (a few index probes).
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, F, Value
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from jobs.queue import selectors
from jobs.queue.models import Job, JobDependency, NotDistinctFrom, Queue
from jobs.queue.states import AVAILABLE, AWAITING_RETRY, FINISHED, SCHEDULED, WAITING, JobStatus
from pipeline_project.db import sql
from pipeline_project.db.counts import sum_matching
from pipeline_project.web.times import absolute, countdown_html

LINKED_AT_MOST = 5  # the jobs a waiting job's page names; "and N more" after them


@dataclass(frozen=True)
class StateLine:
    """A job's state as its page shows it: the badge's word, then what it waits for and what holds it."""

    state: str
    detail: SafeString | str = ""
    holds: tuple[SafeString | str, ...] = ()

    @property
    def text(self) -> SafeString:
        return format_html_join(" · ", "{}", ((part,) for part in (self.detail, *self.holds) if part))


def job_link(job_id, text: str) -> SafeString:
    return format_html('<a href="{}" title="{}">{}</a>', reverse("admin:jobs_job_change", args=[job_id]), job_id, text)


def queue_holds(queues: Iterable[str]) -> dict[str, list[str]]:
    """Per queue, what holds all its jobs back: paused, no live worker serving it ([]: nothing)."""
    queues = set(queues)
    paused = set(Queue.objects.filter(name__in=queues, paused=True).values_list("name", flat=True))
    served = {name for worker in selectors.live_workers() for name in worker.queues}
    return {
        name: ["queue paused"] * (name in paused) + [f"no live worker serves queue {name}"] * (name not in served)
        for name in queues
    }


def state_line(job: Job, *, state: str, attempts, upstream: list) -> StateLine:
    """``job``'s line at ``state`` (``states.shown_state``); ``attempts``: its ``RunAttempts``;
    ``upstream``: the jobs it depends on (``selectors.job_dependencies``)."""
    if job.status != JobStatus.QUEUED:
        return StateLine(state)
    holds = queue_holds([job.queue])[job.queue]
    if state == AVAILABLE:
        holds += _limit_holds(job) + _lock_key_holds(job)
    return StateLine(state, _waits_for(job, state=state, attempts=attempts, upstream=upstream), tuple(holds))


def _waits_for(job: Job, *, state: str, attempts, upstream: list) -> SafeString | str:
    due = job.available_at
    if state == SCHEDULED:
        return format_html("due {} ({})", absolute(due), countdown_html(due))
    if state == AWAITING_RETRY:
        return format_html(
            "next attempt {} of {} at {} ({})", attempts.attempt + 1, attempts.of, absolute(due), countdown_html(due)
        )
    if state == WAITING:
        pending = [linked for linked in upstream if linked.status not in FINISHED]
        if not pending:
            return "for the jobs it depends on to settle"
        links = format_html_join(
            ", ", "{}", ((job_link(linked.job_id, linked.task),) for linked in pending[:LINKED_AT_MOST])
        )
        more = f" and {len(pending) - LINKED_AT_MOST} more" if len(pending) > LINKED_AT_MOST else ""
        return format_html("for {} job{}: {}{}", len(pending), "s" if len(pending) > 1 else "", links, more)
    return ""


def _limit_holds(job: Job) -> list[str]:
    """The queue's limits the job's claim would exceed now."""
    limits = Queue.objects.filter(name=job.queue).first()
    if limits is None:
        return []
    holds = []
    per_partition = limits.limit_per_partition
    where = f" in partition {job.partition_key}" if per_partition else ""
    if limits.max_running is not None:
        if per_partition:
            running = Job.objects.filter(
                status=JobStatus.RUNNING, queue=job.queue, partition_key=job.partition_key
            ).count()
        else:
            running = sum_matching(selectors.job_counts(), [job.queue, None, JobStatus.RUNNING])
        if running >= limits.max_running:
            holds.append(f"queue at its limit (max_running {limits.max_running}, {running} running{where})")
    if limits.rate_limit is not None:
        [(started,)] = sql.rows(
            """
            SELECT count(*) FROM dl_queue_starts
            WHERE queue = %(queue)s AND started_at > now() - make_interval(secs => %(period)s)
              AND (NOT %(per_partition)s OR partition_key = %(partition)s)
            """,
            {
                "queue": job.queue,
                "period": limits.rate_period_sec,
                "per_partition": per_partition,
                "partition": job.partition_key,
            },
        )
        if started >= limits.rate_limit:
            holds.append(
                f"queue at its rate limit ({limits.rate_limit} per {limits.rate_period_sec} s, {started} started{where})"
            )
    return holds


def _lock_key_holds(job: Job) -> list[SafeString]:
    """A running job of its lock key, or a queued one before it (a key's jobs run one at a time, in order)."""
    # Spelled as ix_dl_jobs_running_lock_key's predicate (as the claim's KEY_FREE is), unordered: at
    # most one job of a key runs, and no other index of running jobs is walked for it.
    holder = NotDistinctFrom(F("status"), Value(JobStatus.RUNNING))
    running = Job.objects.filter(holder, lock_key=job.lock_key).values_list("job_id", "task")[:1]
    if running:
        return [format_html("its lock key is held by running job {}", job_link(*running[0]))]
    first = (
        Job.objects.filter(queue=job.queue, lock_key=job.lock_key, status=JobStatus.QUEUED)
        .order_by("priority", "created_at", "job_id")
        .values_list("job_id", "task")
        .first()
    )
    if first and first[0] != job.job_id:
        return [format_html("after job {} of its lock key", job_link(first[0], first[1]))]
    return []


def pending_upstream(job_ids: list) -> dict:
    """``{job_id: how many of the jobs it depends on have not finished}``, for those of ``job_ids`` with any."""
    if not job_ids:
        return {}
    unfinished = JobDependency.objects.filter(job_id__in=job_ids).exclude(upstream__status__in=FINISHED)
    return dict(unfinished.values("job_id").annotate(n=Count("upstream_id")).values_list("job_id", "n").order_by())
