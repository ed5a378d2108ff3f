"""Operators' changes to queues: pause, resume and limits, which every worker's claim reads at once.

A queue exists once something names it; an operator's change to a queue nothing has named (a
typo) is a 404, unless the request asks to create it (``create``).
"""

from dataclasses import asdict, dataclass

from django.conf import settings

from jobs.queue.models import NOTIFY_CHANNEL, QUEUES_CHANNEL, JobStatus
from jobs.queue.services.producers import text_field_problem
from jobs.runtime.config import parse_workers_json
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db import sql

# Whether anything in the database has named a queue: an operator's change (dl_queues), a worker
# serving it, a job of any status (through the seed's ix_dl_jobs_status_queue, a probe per
# status), a schedule.
_QUEUE_NAMED = """
    SELECT EXISTS (SELECT 1 FROM dl_queues WHERE name = %(queue)s)
        OR EXISTS (SELECT 1 FROM dl_workers WHERE queues ? %(queue)s)
        OR EXISTS (SELECT 1 FROM dl_jobs WHERE status = ANY(%(statuses)s) AND queue = %(queue)s)
        OR EXISTS (SELECT 1 FROM dl_schedules WHERE queue = %(queue)s)
"""


def _configured_queues() -> set[str]:
    try:
        served = parse_workers_json(settings.WORKERS_JSON).served("queue")
    except (ValueError, LookupError):  # a WORKERS_JSON the workers refuse to start with serves nothing
        served = {}
    return {*served, settings.SQLRS_QUEUE, settings.INGESTION_QUEUE}


def _queue_name(queue: str, *, create: bool = False) -> str:
    """``queue``, valid and named before (by a job, a worker, a schedule, an operator, a setting:
    WORKERS_JSON, SQLRS_QUEUE, INGESTION_QUEUE), unless it is to be ``create``d."""
    if problem := text_field_problem("queue", queue):
        raise InvalidInputError(f"Invalid queue name: {problem}", details={"queue": [problem]})
    if create or queue in _configured_queues():
        return queue
    [(named,)] = sql.rows(_QUEUE_NAMED, {"queue": queue, "statuses": list(JobStatus.values)})
    if not named:
        raise NotFoundError(
            f"No queue {queue!r}: no job, worker, schedule or setting names it. "
            'To pause or limit it before its first job, send {"create": true}.',
            code="queue_not_found",
            details={"queue": queue},
        )
    return queue


def queue_pause(*, queue: str, by: str, create: bool = False) -> bool:
    """Stop every worker claiming from ``queue`` (running jobs finish); return whether it changed.

    The claim statement itself reads the pause, so it holds at once for every worker,
    whatever it has heard.
    """
    rows = sql.rows(
        """
        INSERT INTO dl_queues (name, paused, changed_at, changed_by) VALUES (%(queue)s, true, now(), %(by)s)
        ON CONFLICT (name) DO UPDATE SET paused = true, changed_at = now(), changed_by = EXCLUDED.changed_by
        WHERE NOT dl_queues.paused
        RETURNING name
        """,
        {"queue": _queue_name(queue, create=create), "by": by},
    )
    return bool(rows)


def queue_resume(*, queue: str, by: str) -> bool:
    """Let workers claim from ``queue`` again, and wake them (NOTIFY); return whether it changed."""
    rows = sql.rows(
        f"""
        WITH resumed AS (
            UPDATE dl_queues SET paused = false, changed_at = now(), changed_by = %(by)s WHERE name = %(queue)s AND paused
            RETURNING name
        )
        SELECT pg_notify('{NOTIFY_CHANNEL}', name) FROM resumed
        """,
        {"by": by, "queue": _queue_name(queue)},
    )
    return bool(rows)


def queues_wake(*, queues: list[str]) -> None:
    """Wake the workers of these queues (NOTIFY): claim from them again."""
    sql.execute(
        f"SELECT pg_notify('{NOTIFY_CHANNEL}', queue) FROM unnest(%(queues)s::text[]) AS queue", {"queues": queues}
    )


@dataclass(frozen=True)
class QueueLimits:
    queue: str
    max_running: int | None  # None: no limit
    rate_limit: int | None  # at most this many started per rate_period_sec (None: no limit)
    rate_period_sec: int | None
    per_partition: bool  # the limits hold per partition_key, not for the whole queue


LIMIT_MAX = 2**31 - 1


def queue_limits_set(
    *,
    queue: str,
    by: str,
    max_running: int | None = None,
    rate_limit: int | None = None,
    rate_period_sec: int | None = None,
    per_partition: bool = False,
    create: bool = False,
) -> QueueLimits:
    """Set (None: clear) a queue's limits, which every worker enforces from its next claim.

    The claim statement enforces them (``jobs.queue.services.claims.jobs_claim_limited``): jobs
    running when a limit is lowered run on, and no job starts until the queue is back under
    it. Workers hear of the change at once (NOTIFY) and claim again.
    """
    limits = QueueLimits(queue, max_running, rate_limit, rate_period_sec, bool(per_partition))
    problems = {
        name: [f"Must be a whole number from 1 to {LIMIT_MAX}, or null."]
        for name in ("max_running", "rate_limit", "rate_period_sec")
        if (value := getattr(limits, name)) is not None
        and (isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= LIMIT_MAX)
    }
    if (rate_limit is None) != (rate_period_sec is None) and not problems:
        problems["rate_period_sec" if rate_period_sec is None else "rate_limit"] = [
            "rate_limit and rate_period_sec go together: set both, or neither."
        ]
    if problems:
        raise InvalidInputError("Invalid queue limits.", details=problems)
    _queue_name(queue, create=create)  # the values first: a body's mistakes are told before the queue's
    sql.execute(
        f"""
        WITH changed AS (
            INSERT INTO dl_queues (name, paused, max_running, rate_limit, rate_period_sec, limit_per_partition,
                                   changed_at, changed_by)
            VALUES (%(queue)s, false, %(max_running)s, %(rate_limit)s, %(rate_period_sec)s, %(per_partition)s,
                    now(), %(by)s)
            ON CONFLICT (name) DO UPDATE SET
                max_running = EXCLUDED.max_running, rate_limit = EXCLUDED.rate_limit,
                rate_period_sec = EXCLUDED.rate_period_sec, limit_per_partition = EXCLUDED.limit_per_partition,
                changed_at = now(), changed_by = EXCLUDED.changed_by
            RETURNING name
        ),
        forgotten AS (DELETE FROM dl_queue_starts WHERE queue = %(queue)s AND %(rate_limit)s::int IS NULL)
        SELECT pg_notify('{QUEUES_CHANNEL}', name), pg_notify('{NOTIFY_CHANNEL}', name) FROM changed
        """,
        {**asdict(limits), "by": by},
    )
    return limits
