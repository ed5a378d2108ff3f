"""Reads of the job queue."""

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import router, transaction
from django.db.models import Expression, Q, QuerySet
from django.db.models.fields.json import KT
from django.utils import timezone

from jobs.queue.models import JOB_COUNTS, Job, JobEvent, PeriodicTask, Queue, Worker
from jobs.queue.services.claims import FIRST_OF_KEY, KEY_FREE
from jobs.queue.services.leases import RUNNING_PICKED_BY, Lease
from jobs.queue.states import FINISHED, QUEUED_SQL, RUNNING_SQL, WAITING_AVAILABLE_AT, shown_status
from pipeline_project.api.errors import NotFoundError
from pipeline_project.db import sql
from pipeline_project.db.snapshot import snapshot


def job_get(*, job_id: uuid.UUID) -> Job:
    job = Job.objects.filter(job_id=job_id).first()
    if job is None:
        raise NotFoundError(f"No job {job_id}.", details={"job_id": str(job_id)})
    return job


@dataclass(frozen=True)
class Linked:
    """A job on the other end of a dependency."""

    job_id: uuid.UUID
    task: str
    status: str  # "waiting" for a queued job that waits itself
    run_anyway: bool


def job_dependencies(*, job_id: uuid.UUID) -> dict[str, list[Linked]]:
    """``{"upstream": the jobs it waits for, "downstream": the jobs waiting for it}``, oldest first."""
    rows = sql.rows(
        """
        SELECT 'upstream', u.job_id, u.task, u.status::text, u.available_at, d.run_anyway
        FROM dl_job_dependencies d JOIN dl_jobs u ON u.job_id = d.upstream_id WHERE d.job_id = %(job_id)s
        UNION ALL
        SELECT 'downstream', j.job_id, j.task, j.status::text, j.available_at, d.run_anyway
        FROM dl_job_dependencies d JOIN dl_jobs j ON j.job_id = d.job_id WHERE d.upstream_id = %(job_id)s
        ORDER BY 2
        """,
        {"job_id": job_id},
    )
    found: dict[str, list[Linked]] = {"upstream": [], "downstream": []}
    for side, linked_id, task, status, available_at, run_anyway in rows:
        shown = shown_status(status, available_at)
        found[side].append(Linked(job_id=linked_id, task=task, status=shown, run_anyway=run_anyway))
    return found


def job_list():
    """All jobs, newest first (job ids are time-ordered); the API filters and paginates this."""
    return Job.objects.order_by("-job_id")


def jobs_with_error(queryset: QuerySet[Job], *, text: str) -> QuerySet[Job]:
    """The jobs of ``queryset`` whose error contains ``text`` (any case), among those created in the
    last ``DL_ERROR_SEARCH_HOURS``: the text of every error ever is no index's, a window's is small."""
    since = timezone.now() - timedelta(hours=settings.DL_ERROR_SEARCH_HOURS)
    return queryset.filter(error__isnull=False, created_at__gte=since, error__icontains=text)


def job_status(*, job_id: uuid.UUID) -> str | None:
    return Job.objects.filter(job_id=job_id).values_list("status", flat=True).first()


def unfinished_job_ids() -> QuerySet:
    """The ids of the jobs not finished yet, as a subquery (``job_id__in=``)."""
    return Job.objects.exclude(status__in=FINISHED).values("job_id")


def jobs_with_args(*, values: dict[str, str | Expression], statuses: Iterable[str] | None = None) -> QuerySet[Job]:
    """Jobs whose args hold each key of ``values`` with that text value (an expression, such as
    an ``OuterRef`` cast to text, makes it a subquery), in ``statuses`` if given, oldest first.

    Compared as ``args ? key AND args ->> key = value``: the expressions an app's partial index
    on dl_jobs can serve (ingestion's on ``args ->> 'run_id'``), which ``args @> ...`` is not."""
    jobs = Job.objects.all()
    for number, (key, value) in enumerate(values.items()):
        jobs = jobs.annotate(**{f"arg_{number}": KT(f"args__{key}")}).filter(
            args__has_key=key, **{f"arg_{number}": value}
        )
    if statuses is not None:
        jobs = jobs.filter(status__in=list(statuses))
    return jobs.order_by("created_at", "job_id")


def job_counts_with_args(*, values: dict[str, str], at_most: int) -> dict[str, int]:
    """How many jobs whose args hold ``values`` (compared as ``jobs_with_args`` does) are in each
    status that has any, each counted up to ``at_most + 1`` (a count cut off: a run of 100,000
    items has as many jobs). One statement: each status comes from ``unnest``, a value the planner
    cannot prove equal to a partial index's (ix_dl_jobs_running_lease would be walked whole, its
    rows filtered by the args), so every count reads a range of an index on the args and status."""
    held = " AND ".join(f"args ? %(key_{n})s AND args ->> %(key_{n})s = %(value_{n})s" for n in range(len(values)))
    params = {"cut": at_most + 1}
    for number, (key, value) in enumerate(values.items()):
        params |= {f"key_{number}": key, f"value_{number}": value}
    counted = sql.rows(
        f"""
        SELECT s.status::text, (SELECT count(*) FROM (
            SELECT FROM dl_jobs WHERE {held} AND status = s.status LIMIT %(cut)s
        ) AS kept)
        FROM unnest(enum_range(NULL::dl_status)) AS s(status)
        """,
        params,
        using=router.db_for_read(Job),
    )
    return {status: count for status, count in counted if count}


def next_available_at(*, queues: list[str], due_since_sec: float = 0.0) -> datetime | None:
    """When the earliest not-yet-available queued job of these queues becomes available.

    ``due_since_sec``: jobs that became available in the last that many seconds count too (an
    answer in the past: claim now). A worker passes the time since its last claim began: a job
    that came due between that claim and this read was not claimable then, and no NOTIFY says so
    (without it, that job waited for the safety sweep). Jobs due before then and still queued
    wait for a busy lock_key, whose end wakes the worker.

    Reads the seed's ix_dl_jobs_claim index (queue, available_at) once per queue. Jobs waiting
    for others do not count: the trigger releasing them wakes the workers.
    """
    return sql.rows(
        f"""
        SELECT min(soonest) FROM unnest(%(queues)s::text[]) AS q(name), LATERAL (
            SELECT available_at AS soonest FROM dl_jobs
            WHERE status = {QUEUED_SQL} AND queue = q.name
              AND available_at > now() - make_interval(secs => %(due_since)s) AND available_at < %(waiting)s
            ORDER BY available_at LIMIT 1
        ) AS next_job
        """,
        {"queues": queues, "due_since": due_since_sec, "waiting": WAITING_AVAILABLE_AT},
    )[0][0]


def job_counts() -> list[tuple[str, str, str, int]]:
    """``(queue, task, status, jobs)`` for each combination with jobs: read from the counts the
    triggers keep (``jobs.queue.models.JOB_COUNTS``), not counted."""
    return JOB_COUNTS.read()


def queue_depths() -> dict[str, dict[str, int]]:
    """``{queue: {status: count}}`` for every queue and status present."""
    depths: dict[str, dict[str, int]] = {}
    for queue, _task, status, jobs in job_counts():
        by_status = depths.setdefault(queue, {})
        by_status[status] = by_status.get(status, 0) + jobs
    return depths


# How many due jobs of each queue ``claimable_depths`` reads at most: a bigger backlog reads as at
# most this many (plenty for a scaling signal), and the read stays bounded whatever the backlog.
CLAIMABLE_WINDOW = 5_000

# Per queue, and per partition_key where its limits hold per partition: the jobs claims made now
# would take. The claim's own conditions (``jobs.queue.services.claims``) on each due job (queued,
# ``available_at <= now()``: neither delayed, backing off nor waiting for other jobs), read through
# ``ix_dl_jobs_claim`` in available_at order up to the window (``claimable_depths`` plans it with
# sorts off, which leave that read no other index: the seed's ``ix_dl_jobs_status_queue``, which the
# planner takes as readily otherwise, would read the queue's jobs that are not due too): no running
# job holds its lock_key (``KEY_FREE``), and it is its key's first queued job (``FIRST_OF_KEY``: one
# per key). None in a paused queue. With each, what the queue's limits leave (NULL: no such limit),
# as ``LIMITED_CLAIM`` counts them: max_running less the queue's running jobs (the counts the
# triggers keep: no walk over running jobs), for per-partition limits max_running itself
# (``claimable_depths`` subtracts each partition's running jobs); rate_limit less the starts in its
# period. The queues: those with jobs (the counts, which also say which have queued jobs to read)
# and those with operator state.
_KEY_FREE = KEY_FREE.format(key="w.lock_key")
_FIRST_OF_KEY = FIRST_OF_KEY.replace("%(queue)s", "w.queue")  # the queue of each job read
CLAIMABLE_DEPTHS = f"""
    WITH queues AS (
        SELECT name, bool_or(has_queued) AS has_queued FROM (
            SELECT queue AS name, coalesce(sum(n) FILTER (WHERE status = {QUEUED_SQL}), 0) > 0 AS has_queued
            FROM dl_job_counts GROUP BY queue HAVING sum(n) <> 0
            UNION ALL
            SELECT name, false FROM dl_queues
        ) AS known
        GROUP BY name
    ),
    claimable AS MATERIALIZED (
        SELECT q.name AS queue, CASE WHEN l.limit_per_partition THEN w.partition_key ELSE '' END AS part,
               count(*) AS n
        FROM queues q LEFT JOIN dl_queues l ON l.name = q.name
        CROSS JOIN LATERAL (
            SELECT job_id, queue, lock_key, partition_key FROM dl_jobs
            WHERE status = {QUEUED_SQL} AND queue = q.name AND available_at <= now()
            ORDER BY available_at
            LIMIT %(window)s
        ) AS w
        WHERE q.has_queued AND l.paused IS NOT TRUE AND {_KEY_FREE} AND {_FIRST_OF_KEY}
        GROUP BY 1, 2
    )
    SELECT q.name, c.part, c.n, l.limit_per_partition AND l.max_running IS NOT NULL,
           CASE WHEN l.max_running IS NULL THEN NULL WHEN l.limit_per_partition THEN l.max_running
                ELSE l.max_running - coalesce((
                    SELECT sum(k.n) FROM dl_job_counts k WHERE k.queue = c.queue AND k.status = {RUNNING_SQL}), 0)::bigint
           END,
           CASE WHEN l.rate_limit IS NOT NULL THEN l.rate_limit - (
               SELECT count(*) FROM dl_queue_starts s
               WHERE s.queue = c.queue AND s.started_at > now() - make_interval(secs => l.rate_period_sec)
                 AND (NOT l.limit_per_partition OR s.partition_key = c.part)) END
    FROM queues q LEFT JOIN claimable c ON c.queue = q.name LEFT JOIN dl_queues l ON l.name = c.queue
"""
# The running jobs of queues limited per partition, by partition: a walk over the running jobs
# only (their partial indexes), which the limited claim of such a queue makes at every claim.
RUNNING_BY_PARTITION = f"""
    SELECT queue, partition_key, count(*) FROM dl_jobs
    WHERE status = {RUNNING_SQL} AND queue = ANY (%(queues)s::text[])
    GROUP BY 1, 2
"""


def claimable_depths() -> dict[str, int]:
    """``{queue: jobs a claim could take now}`` for every queue with jobs or operator state (0: none,
    or paused), capped by the queue's limits (for each partition, with per-partition limits) and at
    most ``CLAIMABLE_WINDOW``: what KEDA scales the workers on (``dl_queue_claimable_jobs``). Reads
    each queue's due jobs through ``ix_dl_jobs_claim``, two index probes each, never a finished job."""
    with transaction.atomic():  # sorts off for this statement only, put back in a caller's transaction
        was = sql.rows("SELECT current_setting('enable_sort'), set_config('enable_sort', 'off', true)")[0][0]
        rows = sql.rows(CLAIMABLE_DEPTHS, {"window": CLAIMABLE_WINDOW, "ending": []})
        sql.execute("SELECT set_config('enable_sort', %(was)s, true)", {"was": was})
    by_partition = sorted({queue for queue, _, _, per_partition, _, _ in rows if per_partition})
    running = {}
    if by_partition:
        running = {(q, part): n for q, part, n in sql.rows(RUNNING_BY_PARTITION, {"queues": by_partition})}
    depths: dict[str, int] = {}
    for queue, part, claimable, per_partition, max_running_left, starts_left in rows:
        running_left = max_running_left - running.get((queue, part), 0) if per_partition else max_running_left
        budgets = [max(0, left) for left in (running_left, starts_left) if left is not None]
        depths[queue] = depths.get(queue, 0) + min([claimable or 0, *budgets])
    return depths


def live_worker_cutoff() -> datetime:
    """A worker is alive if it heartbeated after this (within three heartbeat periods); a
    worker killed without a goodbye shows as dead until the periodic task forgets it."""
    return timezone.now() - timedelta(seconds=3 * settings.DL_HEARTBEAT_SEC)


def running_leases_picked_by(*, worker: str) -> list[Lease]:
    """The leases of the running jobs that worker ``worker`` (its name) was given last."""
    rows = sql.rows(f"SELECT j.job_id, j.attempt, j.started_at FROM {RUNNING_PICKED_BY}", {"names": [worker]})
    return [Lease(job_id, attempt, started_at) for job_id, attempt, started_at in rows]


def live_workers() -> list[Worker]:
    return list(Worker.objects.filter(heartbeat_at__gte=live_worker_cutoff()))


def workers() -> list[dict]:
    """Every registered worker, alive or dead, with when it was last seen."""
    cutoff = live_worker_cutoff()
    return [
        {
            "worker_id": str(worker.worker_id),
            "hostname": worker.hostname,
            "pid": worker.pid,
            "queues": worker.queues,
            "running_jobs": worker.running_jobs,
            "version": worker.version,
            "started_at": worker.started_at,
            "last_seen_at": worker.heartbeat_at,
            "alive": worker.heartbeat_at >= cutoff,
        }
        for worker in Worker.objects.all()
    ]


@snapshot()
def queues() -> list[dict]:
    """Every queue with jobs or operator state: its depth by status, whether it is paused, its
    limits, and (rate-limited ones) how many jobs started in the last rate period."""
    depths = queue_depths()
    states = {queue.name: queue for queue in Queue.objects.all()}
    started = queue_starts_in_period()
    unset = Queue()
    return [
        {
            "name": name,
            "paused": state.paused,
            "changed_at": state.changed_at if name in states else None,
            "changed_by": state.changed_by,
            "depth": depths.get(name, {}),
            "max_running": state.max_running,
            "rate_limit": state.rate_limit,
            "rate_period_sec": state.rate_period_sec,
            "per_partition": state.limit_per_partition,
            "started_in_period": started.get(name, 0) if state.rate_limit else None,
        }
        for name in sorted(set(depths) | set(states))
        for state in [states.get(name, unset)]
    ]


def queue_starts_in_period() -> dict[str, int]:
    """Per rate-limited queue, the jobs started in its last rate period (all partitions)."""
    return dict(
        sql.rows(
            """
            SELECT q.name, count(s.*) FROM dl_queues q
            JOIN dl_queue_starts s ON s.queue = q.name AND s.started_at > now() - make_interval(secs => q.rate_period_sec)
            WHERE q.rate_limit IS NOT NULL
            GROUP BY q.name
            """
        )
    )


def queue_has_available_jobs(*, queue: str) -> bool:
    """Whether a queued job of ``queue`` is available now (one probe of ix_dl_jobs_claim)."""
    return sql.rows(
        f"SELECT EXISTS (SELECT FROM dl_jobs WHERE status = {QUEUED_SQL} AND queue = %(queue)s AND available_at <= now())",
        {"queue": queue},
    )[0][0]


def queue_limits(*, queues: list[str]) -> dict[str, Queue]:
    """The limited ones among ``queues``, by name."""
    limited = Queue.objects.filter(name__in=queues).filter(Q(max_running__isnull=False) | Q(rate_limit__isnull=False))
    return {queue.name: queue for queue in limited}


def status_section() -> tuple[str, dict]:
    """The jobs part of /status: workers (alive or dead), queues (depth, paused), periodic tasks."""
    periodic = list(
        PeriodicTask.objects.values("name", "last_started_at", "last_finished_at", "last_runner", "last_result")
    )
    all_queues = queues()
    return "jobs", {
        "workers": workers(),
        "queues": {queue["name"]: queue["depth"] for queue in all_queues},
        "paused_queues": [queue["name"] for queue in all_queues if queue["paused"]],
        "periodic_tasks": periodic,
    }


# --- async reads, for streams that wait without a thread ------------------------------------


async def job_events_page(*, pool, job_id: uuid.UUID, after: int, limit: int) -> list[dict]:
    """The job's events after ``after``, in order, as the events API renders them."""
    async with pool.connection() as conn:
        cursor = await conn.execute(
            "SELECT event_id, job_id, queue, ts, kind, payload FROM dl_job_events "
            "WHERE job_id = %(job_id)s AND event_id > %(after)s ORDER BY event_id LIMIT %(limit)s",
            {"job_id": job_id, "after": after, "limit": limit},
        )
        rows = await cursor.fetchall()
    return [
        {
            "event_id": event_id,
            "job_id": str(event_job_id),
            "queue": queue,
            "ts": ts.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "kind": kind,
            "payload": payload,
        }
        for event_id, event_job_id, queue, ts, kind, payload in rows
    ]


async def job_status_of(*, pool, job_id: uuid.UUID) -> str | None:
    async with pool.connection() as conn:
        cursor = await conn.execute("SELECT status::text FROM dl_jobs WHERE job_id = %(job_id)s", {"job_id": job_id})
        row = await cursor.fetchone()
    return row[0] if row else None


def job_event_count(*, job_id) -> int:
    return JobEvent.objects.filter(job_id=job_id).count()


def job_journal(*, job_id, limit: int) -> tuple[list[tuple], dict[int, tuple]]:
    """A job's newest ``limit`` events besides heartbeats, oldest first, as ``(event_id, ts, kind,
    payload)``; and the heartbeats after the i-th of them (from 1) as ``{i: (count, first ts, last
    ts, last event_id)}``, counted in the database instead of read."""
    rows = list(
        reversed(
            JobEvent.objects.filter(job_id=job_id)
            .exclude(kind="heartbeat")
            .order_by("-event_id")
            .values_list("event_id", "ts", "kind", "payload")[:limit]
        )
    )
    if not rows:
        return [], {}
    beats = sql.rows(
        """
        SELECT width_bucket(event_id, %(event_ids)s::bigint[]), count(*), min(ts), max(ts), max(event_id)
        FROM dl_job_events
        WHERE job_id = %(job_id)s AND kind = 'heartbeat' AND event_id > %(first_event_id)s GROUP BY 1
        """,
        {"event_ids": [row[0] for row in rows], "job_id": job_id, "first_event_id": rows[0][0]},
    )
    return rows, {bucket: (count, first, last, last_id) for bucket, count, first, last, last_id in beats}


def latest_job_events(*, job_ids: list, per_job: int) -> list[tuple]:
    """Each job's newest ``per_job`` events besides heartbeats, as ``(job_id, event_id, ts, kind,
    payload)`` by job, oldest first; the payload keeps only what a run's times and numbers need."""
    rows = sql.rows(
        """
        SELECT e.job_id, e.event_id, e.ts, e.kind, e.payload FROM unnest(%(job_ids)s::uuid[]) AS j(job_id), LATERAL (
            SELECT job_id, event_id, ts, kind,
                   jsonb_strip_nulls(jsonb_build_object('attempt', payload -> 'attempt', 'run', payload -> 'run',
                       'reason', payload -> 'reason', 'available_at', payload -> 'available_at',
                       'first_attempt', payload -> 'first_attempt')) AS payload
            FROM dl_job_events WHERE job_id = j.job_id AND kind <> 'heartbeat' ORDER BY event_id DESC
            LIMIT %(per_job)s
        ) AS e
        ORDER BY e.job_id, e.event_id
        """,
        {"job_ids": job_ids, "per_job": per_job},
    )
    return [(job_id, event_id, ts, kind, sql.json_value(payload)) for job_id, event_id, ts, kind, payload in rows]
