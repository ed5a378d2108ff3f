"""Reads of durable processes: a process with its history, and its full trace."""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import connection
from django.db.models import Count
from django.utils import timezone

from jobs.processes.models import TASK_DONE_CHANNEL, Process, Running, Schedule, Task
from jobs.processes.registry import ProcessView, require
from jobs.services._db import _json
from pipeline_project.core.errors import ApplicationError, InvalidInputError, NotFoundError
from pipeline_project.core.notifications import blocking_hub, waiting_resources

DIRECTIONS = ("forward", "backward")
ENDED = ("finished", "error", "cancelled")


class StepTimeoutError(ApplicationError):
    status = 504
    code = "timeout"


@dataclass(frozen=True)
class TaskOutcome:
    """How a client's task stands: its status and response, and its process's status."""

    status: str
    response: Any
    process_status: str


_OUTCOME = """
SELECT t.status, t.response, p.status FROM dl_proc_tasks t JOIN dl_processes p ON p.id = t.process_pk
WHERE t.task_id = %s
"""


def task_outcome(task_id: int) -> TaskOutcome | None:
    """None: the task is gone with its process (it removed it)."""
    with connection.cursor() as cursor:
        cursor.execute(_OUTCOME, [task_id])
        row = cursor.fetchone()
    return None if row is None else TaskOutcome(row[0], _json(row[1]), row[2])


def wait_for_task(task_id: int, *, timeout: float) -> TaskOutcome | None:
    """Wait (on a NOTIFY, holding no connection) until a task has ended; None if its process was removed."""
    deadline = time.monotonic() + timeout
    with blocking_hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)]) as subscription:
        while True:
            outcome = task_outcome(task_id)
            if outcome is None or outcome.status in ENDED:
                return outcome
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepTimeoutError("timeout")
            subscription.wait_blocking(min(left, 5.0))  # re-read now and then: a NOTIFY may be lost


async def wait_for_task_async(task_id: int, *, timeout: float) -> TaskOutcome | None:
    """``wait_for_task`` for async views: on the event loop, holding no thread, and a pooled
    connection only while it reads."""
    deadline = time.monotonic() + timeout
    async with waiting_resources() as resources:
        async with resources.hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)]) as subscription:
            while True:
                async with resources.pool.connection() as conn:
                    row = await (await conn.execute(_OUTCOME, [task_id])).fetchone()
                if row is None or row[0] in ENDED:
                    return None if row is None else TaskOutcome(row[0], row[1], row[2])
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepTimeoutError("timeout")
                await subscription.wait(min(left, 5.0))


def history_range_clean(history_range: dict | None) -> dict:
    """``{offset, limit, direction}`` checked; offset is the event id to start after (forward)
    or before (backward; 0 or absent: from the last)."""
    history_range = dict(history_range or {})
    unknown = set(history_range) - {"offset", "limit", "direction"}
    if unknown:
        raise InvalidInputError(f"unknown range fields: {', '.join(sorted(unknown))}")
    for name in ("offset", "limit"):
        value = history_range.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise InvalidInputError(f"range {name} must be a non-negative integer")
    if history_range.get("direction", "forward") not in DIRECTIONS:
        raise InvalidInputError("range direction must be forward or backward")
    return history_range


@dataclass(frozen=True)
class PreparedTask:
    """A client's task in the schedule: wait for its end for up to ``timeout`` seconds."""

    task_id: int
    timeout: float


def init_in_progress(*, namespace: str, process_id: str) -> PreparedTask | None:
    """The init task to wait for while the process is in ``init`` (404 if there is no such process)."""
    definition = require(namespace)
    process = _process(namespace, process_id)
    if process.status != "init":
        return None
    init = Task.objects.filter(process=process, task_type="init").order_by("task_id").first()
    return None if init is None else PreparedTask(init.task_id, definition.process_step_timeout)


def process_get(
    *, namespace: str, process_id: str, history_range: dict | None = None, wait_for_init: bool = True
) -> dict[str, Any]:
    """The process with its history in ``history_range``; while it is in ``init``, waits for init to end."""
    require(namespace)
    if wait_for_init and (init := init_in_progress(namespace=namespace, process_id=process_id)):
        wait_for_task(init.task_id, timeout=init.timeout)
    process = _process(namespace, process_id)
    view = process_view_by_pk(process.id, history_range)
    return {
        "namespace": namespace,
        "process_id": view.process_id,
        "status": view.status,
        "previous_status": process.previous_status,
        "status_changed_at": process.status_changed_at.isoformat(),
        "detail": view.detail,
        "aux_state": view.aux_state,
        "metadata": view.metadata,
        "corrupted_by": process.corrupted_by,
        "history": view.history,
        "last_event_id": view.last_event_id,
        "range": view.range,
    }


def process_trace(*, namespace: str, process_id: str) -> list[dict[str, Any]]:
    """Every task of the process in order, with its events."""
    require(namespace)
    process = _process(namespace, process_id)
    events: dict[int, list[dict]] = {}
    for event in process_view_by_pk(process.id).history:
        events.setdefault(event["task_id"], []).append(event)
    return [
        {
            "task_id": task.task_id,
            "task_type": task.task_type,
            "status": task.status,
            "scheduled_time": task.scheduled_time.isoformat(),
            "running_time": task.running_time.isoformat() if task.running_time else None,
            "finished_time": task.finished_time.isoformat() if task.finished_time else None,
            "args": task.args,
            "metadata": task.metadata,
            "idempotency_key": task.idempotency_key,
            "response": task.response,
            "retry_interval": task.last_retry_interval,
            "retry_attempts": task.attempts_count,
            "events": events.get(task.task_id, []),
        }
        for task in Task.objects.filter(process=process).order_by("task_id")
    ]


def view_select(history_range: dict) -> tuple[str, dict]:
    """The select-list of a process row aliased ``p`` as a processor sees it (its fields and its
    history in ``history_range``, aggregated), with its parameters; read by :func:`view_from`."""
    backward = history_range.get("direction") == "backward"
    sql = f"""
        p.process_id, p.namespace, p.status, p.detail, p.aux_state, p.metadata, p.last_event_id,
        (SELECT coalesce(jsonb_agg(jsonb_build_object(
                    'event_id', e.event_id, 'task_id', e.task_id, 'timestamp', e.timestamp,
                    'metadata', e.metadata, 'payload', e.payload) ORDER BY e.n), '[]'::jsonb)
         FROM (SELECT *, row_number() OVER () AS n FROM (
                   SELECT * FROM dl_proc_events
                   WHERE process_pk = p.id
                     AND (coalesce(%(range_offset)s, 0) = 0 OR event_id {"<" if backward else ">"} %(range_offset)s)
                   ORDER BY event_id {"DESC" if backward else "ASC"} LIMIT %(range_limit)s
               ) AS ranged) AS e)
    """
    return sql, {"range_offset": history_range.get("offset"), "range_limit": history_range.get("limit")}


def view_from(columns: tuple, history_range: dict) -> ProcessView:
    """A ProcessView from the columns :func:`view_select` reads."""
    process_id, namespace, status, detail, aux_state, metadata, last_event_id, events = columns
    return ProcessView(
        process_id=process_id,
        namespace=namespace,
        status=status,
        detail=detail,
        aux_state=_json(aux_state),
        metadata=_json(metadata),
        history=_json(events),
        last_event_id=last_event_id,
        range=history_range,
    )


def process_view_by_pk(pk: int, history_range: dict | None = None) -> ProcessView | None:
    """The process and its history in ``history_range`` (None: the process was removed)."""
    history_range = history_range_clean(history_range)
    columns, params = view_select(history_range)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM dl_processes p WHERE p.id = %(pk)s", {**params, "pk": pk})
        row = cursor.fetchone()
    return None if row is None else view_from(row, history_range)


def next_scheduled_time(*, namespace: str):
    """When the namespace's next waiting task is due (None: nothing waits)."""
    return (
        Schedule.objects.filter(namespace=namespace, status="waiting")
        .order_by("scheduled_time")
        .values_list("scheduled_time", flat=True)
        .first()
    )


def _process(namespace: str, process_id: str) -> Process:
    process = Process.objects.filter(namespace=namespace, process_id=process_id).first()
    if process is None:
        raise NotFoundError("process not found", code="process_not_found")
    return process


def namespace_health(*, namespace: str) -> dict[str, Any]:
    """A registered namespace's health (404 for an unknown one)."""
    require(namespace)
    return {**namespace_counts(namespace=namespace), "status": "ok"}


def namespace_counts(*, namespace: str) -> dict[str, Any]:
    """A namespace's processes by status, tasks running now and timers due within the hour."""
    counts = dict.fromkeys(("init", "running", "error"), 0)
    counts.update(
        Process.objects.filter(namespace=namespace).values("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "namespace": namespace,
        "processes": counts,
        "running_tasks": Running.objects.filter(namespace=namespace).count(),
        "timers_due_next_hour": _timers(namespace=namespace, within_sec=3600).count(),
    }


def timers_due(*, within_sec: float, limit: int) -> list[dict[str, Any]]:
    """Timers (timeout, remove) due within ``within_sec``, soonest first, over every namespace."""
    return list(
        _timers(within_sec=within_sec)
        .order_by("scheduled_time")
        .values("namespace", "process__process_id", "task_type", "status", "scheduled_time", "task_id")[:limit]
    )


def _timers(*, within_sec: float, **filters):
    return Schedule.objects.filter(
        task_type__in=("timeout", "remove"),
        scheduled_time__lte=timezone.now() + timedelta(seconds=within_sec),
        **filters,
    )
