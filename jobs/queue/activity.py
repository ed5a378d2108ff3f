"""Reads of what the queues do now, for the console: each queue's wait and run times over the last
hour, and the jobs each worker runs.

The times are percentiles, and percentiles of minutes do not add up to an hour's or a week's:
kept per minute, they would need a histogram appended by every statement that ends a run. They
come from the journal instead, over the last hour only (whatever window a chart shows), and from
its newest :data:`TIMES_EVENTS` events at most: at any rate of work, one index range."""

from jobs.queue.services.leases import RUNNING_PICKED_BY
from jobs.queue.states import EventKind, sql_literal
from pipeline_project.db import sql

TIMES_MINUTES = 60
# About 2,000 picks, a p95 of the slowest 100: a busy hour's newest (at 1,000 jobs/s, its last 2 s).
TIMES_EVENTS = 6_000

# The events of the last hour among the newest TIMES_EVENTS (the primary key's range).
_RECENT = (
    "{e}.event_id > (SELECT coalesce(max(event_id), 0) FROM dl_job_events) - %(events)s "
    "AND {e}.ts >= now() - make_interval(mins => %(minutes)s)"
)
# Wait: each pick since the job was ready, that is since its queued or requeue event (or the
# available_at that event set, for scheduled jobs and retries).
WAITS = f"""
    SELECT p.queue, percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY extract(epoch FROM p.ts - ready.at))
    FROM dl_job_events p
    CROSS JOIN LATERAL (
        SELECT GREATEST(e.ts, COALESCE((e.payload->>'available_at')::timestamptz, e.ts)) AS at
        FROM dl_job_events e
        WHERE e.job_id = p.job_id AND e.event_id < p.event_id
          AND e.kind IN ({sql_literal(EventKind.QUEUED)}, {sql_literal(EventKind.REQUEUE)})
        ORDER BY e.event_id DESC LIMIT 1
    ) AS ready
    WHERE p.kind = {sql_literal(EventKind.PICKED)} AND {_RECENT.format(e="p")}
    GROUP BY p.queue
"""
RUNS = f"""
    SELECT e.queue, percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY (e.payload->>'duration_ms')::float8 / 1000)
    FROM dl_job_events e WHERE {_RECENT.format(e="e")} AND e.payload ? 'duration_ms'
    GROUP BY e.queue
"""


def run_times() -> dict[str, dict]:
    """``{queue: {"wait": {"p50", "p95"} | None, "run": ...}}`` in seconds, over the last hour:
    wait from ready to picked, run the handler's own duration."""
    params = {"events": TIMES_EVENTS, "minutes": TIMES_MINUTES}
    times: dict[str, dict] = {}
    for name, (p50, p95) in sql.rows(WAITS, params):
        times.setdefault(name, {"wait": None, "run": None})["wait"] = {"p50": max(0.0, p50), "p95": max(0.0, p95)}
    for name, (p50, p95) in sql.rows(RUNS, params):
        times.setdefault(name, {"wait": None, "run": None})["run"] = {"p50": p50, "p95": p95}
    return times


# The running jobs the workers ``names`` were given last, longest running first.
RUNNING = f"""
    SELECT j.job_id, j.task, j.queue, j.started_at, picked.worker FROM {RUNNING_PICKED_BY}
    ORDER BY j.started_at, j.job_id LIMIT %(limit)s
"""


def running_jobs(*, worker_names: list[str], limit: int) -> list[tuple]:
    """``(job_id, task, queue, started_at, worker name)`` of at most ``limit`` jobs the workers
    named run now: the running jobs (few: the workers' slots) and one journal probe each."""
    return sql.rows(RUNNING, {"names": worker_names, "limit": limit}) if worker_names else []
