"""Producers: enqueue jobs, with the queue's rules and defaults, idempotently."""

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction

from jobs.queue.models import uuid7
from jobs.queue.services.dependencies import dependencies_insert, dependencies_problems, depends_on_problem
from jobs.queue.states import WAITING_AVAILABLE_AT, EventKind, sql_literal
from pipeline_project.api.errors import ConflictError, InvalidInputError
from pipeline_project.db import sql
from pipeline_project.db.storable import json_problem, text_problem


@dataclass(frozen=True)
class JobSpec:
    queue: str
    task: str
    lock_key: str
    args: dict = field(default_factory=dict)
    idempotency_key: str | None = None
    partition_key: str = ""
    priority: int = 100
    available_at: datetime | None = None
    max_attempts: int = 5
    lease_ttl_sec: int | None = None  # None: settings.DL_DEFAULT_LEASE_TTL_SEC
    producer: str | None = None
    consumer_group: str | None = None
    job_id: uuid.UUID | None = None
    depends_on: tuple[uuid.UUID, ...] | list[uuid.UUID] = ()  # wait until these jobs succeeded
    run_anyway: bool = False  # run once depends_on all finished, even if some failed


# Queue and task names: they appear in URLs, metrics labels and log lines.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
# Longest accepted UTF-8 encoding of each text field. The indexed ones (queue, lock_key,
# idempotency_key) must fit one btree entry (2,704 bytes at most) with room to spare, or
# the insert, or worse the claim, would fail; the others are bounded all the same.
TEXT_LIMITS = {
    "queue": 200,
    "task": 200,
    "lock_key": 1024,
    "idempotency_key": 1024,
    "partition_key": 1024,
    "producer": 255,
    "consumer_group": 255,
}
# A worker renews each lease every TTL / 3 (or every DL_HEARTBEAT_SEC if sooner): below 3 s the
# renewal could not be relied on to land in time, so such a lease would be reaped while it runs.
MIN_LEASE_TTL_SEC = 3
INTEGER_LIMITS = {
    "priority": (0, 2**31 - 1),
    "max_attempts": (0, 1000),
    "lease_ttl_sec": (MIN_LEASE_TTL_SEC, 7 * 24 * 3600),
}


def text_field_problem(name: str, value: str) -> str | None:
    """Why ``value`` cannot be a job's ``name`` field, or None (the API's validators call this too)."""
    if problem := text_problem(value):
        return f"Must not be stored: it {problem}."
    if len(value.encode("utf-8")) > TEXT_LIMITS[name]:
        return f"Must be at most {TEXT_LIMITS[name]} bytes in UTF-8."
    if name in ("queue", "task") and not NAME_PATTERN.match(value):
        return "Use letters, digits and _ . : / - only, starting with a letter or digit."
    return None


def job_spec_problems(spec: JobSpec) -> dict[str, list[str]]:
    """Every rule a job must meet, by field; empty when the spec can be enqueued."""
    problems: dict[str, list[str]] = {}
    for name in TEXT_LIMITS:
        value = getattr(spec, name)
        if value is not None and (problem := text_field_problem(name, value)):
            problems[name] = [problem]
    for name, (low, high) in INTEGER_LIMITS.items():
        value = getattr(spec, name)
        if value is not None and not low <= value <= high:
            problems[name] = [f"Must be from {low} to {high}."]
    if not isinstance(spec.args, dict):
        problems["args"] = ["Must be a JSON object."]
    elif problem := json_problem(spec.args):
        problems["args"] = [f"Must be storable JSON: it {problem}."]
    if problem := depends_on_problem(spec.job_id, spec.depends_on):
        problems["depends_on"] = [problem]
    return problems


@dataclass(frozen=True)
class Enqueued:
    job_id: uuid.UUID
    status: str
    created: bool


_SIGNATURE_FIELDS = ("queue", "task", "args", "lock_key")


def job_enqueue_many(*, specs: list[JobSpec]) -> list[Enqueued]:
    """Insert jobs (and their ``queued`` events) in one statement; idempotent per key.

    A spec whose idempotency_key already names a job returns that job, unless the job was
    made with a different queue, task, args or lock_key: then nothing is written and the
    call is a conflict. Concurrent calls with one key create exactly one job, because
    ``ON CONFLICT DO NOTHING`` waits for the first insert to commit.
    """
    problems = {str(index): found for index, spec in enumerate(specs) if (found := job_spec_problems(spec))}
    problems = problems or dependencies_problems(specs)
    if problems:
        raise InvalidInputError("Some jobs break the queue's rules.", details={"jobs": problems})
    new_ids = [spec.job_id or uuid7() for spec in specs]
    with transaction.atomic():
        inserted = _jobs_insert(specs, new_ids)
        inserted.update(dependencies_insert(specs=specs, job_ids=new_ids, inserted=inserted))
        keys = [spec.idempotency_key for spec, job_id in zip(specs, new_ids, strict=True) if job_id not in inserted]
        existing = _existing_by_key(keys) if keys else {}
        results = []
        for spec, job_id in zip(specs, new_ids, strict=True):
            if job_id in inserted:
                results.append(Enqueued(job_id=job_id, status=inserted[job_id], created=True))
                continue
            found = existing[spec.idempotency_key]
            mismatched = [name for name in _SIGNATURE_FIELDS if found[name] != getattr(spec, name)]
            if mismatched:
                raise ConflictError(
                    f"idempotency_key {spec.idempotency_key!r} already names a different job.",
                    code="idempotency_conflict",
                    details={
                        "idempotency_key": spec.idempotency_key,
                        "job_id": str(found["job_id"]),
                        "differs": mismatched,
                    },
                )
            results.append(Enqueued(job_id=found["job_id"], status=found["status"], created=False))
    return results


def _jobs_insert(specs: list[JobSpec], new_ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Insert the jobs whose idempotency_key is new, with their journal rows; ``{job_id: status}`` of those."""
    default_ttl = settings.DL_DEFAULT_LEASE_TTL_SEC
    columns = {
        "job_id": ("uuid", new_ids),
        "queue": ("text", [s.queue for s in specs]),
        "task": ("text", [s.task for s in specs]),
        "args": ("jsonb", [json.dumps(s.args) for s in specs]),
        "idempotency_key": ("text", [s.idempotency_key for s in specs]),
        "lock_key": ("text", [s.lock_key for s in specs]),
        "partition_key": ("text", [s.partition_key for s in specs]),
        "priority": ("int", [s.priority for s in specs]),
        "available_at": ("timestamptz", [s.available_at for s in specs]),
        "max_attempts": ("int", [s.max_attempts for s in specs]),
        "lease_ttl_sec": ("int", [default_ttl if s.lease_ttl_sec is None else s.lease_ttl_sec for s in specs]),
        "producer": ("text", [s.producer for s in specs]),
        "consumer_group": ("text", [s.consumer_group for s in specs]),
        "depends_on": ("jsonb", [json.dumps([str(i) for i in s.depends_on]) if s.depends_on else None for s in specs]),
    }
    unnest = ", ".join(f"%({name})s::{sql_type}[]" for name, (sql_type, _values) in columns.items())
    names = ", ".join(columns)
    return dict(
        sql.rows(
            f"""
            WITH input AS (SELECT * FROM unnest({unnest}) AS t({names})),
            inserted AS (
                INSERT INTO dl_jobs ({names.removesuffix(", depends_on")})
                SELECT job_id, queue, task, args, idempotency_key, lock_key, partition_key, priority,
                       CASE WHEN depends_on IS NULL THEN COALESCE(available_at, now()) ELSE %(waiting)s END,
                       max_attempts, lease_ttl_sec, producer, consumer_group
                FROM input
                ON CONFLICT (idempotency_key) DO NOTHING
                RETURNING job_id, queue, status, producer, idempotency_key
            ),
            -- A waiting job's journal row says what it waits for and when it was asked to run.
            journal AS (
                INSERT INTO dl_job_events (job_id, queue, kind, payload)
                SELECT i.job_id, i.queue, {sql_literal(EventKind.QUEUED)},
                       jsonb_build_object('producer', i.producer, 'idempotency_key', i.idempotency_key,
                                          'available_at', COALESCE(t.available_at, now()))
                       || CASE WHEN t.depends_on IS NULL THEN '{{}}'::jsonb
                               ELSE jsonb_build_object('depends_on', t.depends_on, 'waiting', true) END
                FROM inserted i JOIN input t ON t.job_id = i.job_id
            )
            SELECT job_id, status::text FROM inserted
            """,
            {"waiting": WAITING_AVAILABLE_AT, **{name: values for name, (_sql_type, values) in columns.items()}},
        )
    )


def _existing_by_key(keys: list[str]) -> dict[str, dict]:
    rows = sql.rows(
        "SELECT idempotency_key, job_id, status::text, queue, task, args, lock_key FROM dl_jobs "
        "WHERE idempotency_key = ANY (%(keys)s)",
        {"keys": keys},
    )
    return {
        key: {
            "job_id": job_id,
            "status": status,
            "queue": queue,
            "task": task,
            "args": sql.json_value(args),
            "lock_key": lock_key,
        }
        for key, job_id, status, queue, task, args, lock_key in rows
    }


def job_enqueue(*, spec: JobSpec) -> Enqueued:
    return job_enqueue_many(specs=[spec])[0]


# How many of the known tasks a refusal lists.
KNOWN_TASKS_LISTED = 50


def job_trigger_many(*, specs: list[JobSpec]) -> list[Enqueued]:
    """:func:`job_enqueue_many` for a client outside the code (the API's triggers), of tasks some
    worker runs only: this deployment's handlers' or ``JOBS_EXTERNAL_TASKS``'. A typo in a task's
    name is a 400 naming the known tasks, not a job that fails on a worker later; nothing is written."""
    from jobs.queue.handlers import task_runnable, tasks_known  # jobs.queue.handlers imports this package

    unknown = sorted({spec.task for spec in specs if not task_runnable(spec.task)})
    if unknown:
        known = tasks_known()
        listed = ", ".join(known[:KNOWN_TASKS_LISTED]) + (", ..." if len(known) > KNOWN_TASKS_LISTED else "")
        raise InvalidInputError(
            f"No worker runs task {', '.join(map(repr, unknown))}; known tasks: {listed}. A task that another "
            "service's workers run is named in JOBS_EXTERNAL_TASKS.",
            code="unknown_task",
            details={
                "task": [f"Unknown task {name!r}." for name in unknown],
                "known_tasks": known[:KNOWN_TASKS_LISTED],
            },
        )
    return job_enqueue_many(specs=specs)
