"""Reads of durable processes: a process with its history, and its full trace."""

import json
import time
from contextlib import asynccontextmanager, contextmanager
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
from pipeline_project.core.notifications import (
    Listening,
    Subscription,
    WaitingResources,
    blocking_hub,
    waiting_resources,
)

DIRECTIONS = ("forward", "backward")
ENDED = ("finished", "error", "cancelled")
RECHECK_SEC = 5.0  # a waiter re-reads its task this often without a notification


class StepTimeoutError(ApplicationError):
    status = 504
    code = "timeout"


@dataclass(frozen=True)
class TaskOutcome:
    """How a client's task stands: its status and response, and its process's status."""

    status: str
    response: Any
    process_status: str


@dataclass(frozen=True)
class PreparedTask:
    """A client's task in the schedule: wait for its end for up to ``timeout`` seconds."""

    task_id: int
    timeout: float


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


def _notified_outcome(subscription: Subscription, task_id: int) -> TaskOutcome | None | bool:
    """The outcome a task's end notification carried (``[status, response, process status]``,
    when short), or False: read it."""
    data = subscription.received.pop(str(task_id), "")
    if not data:
        return False
    status, response, process_status = json.loads(data)
    return TaskOutcome(status, response, process_status)


def _ended(outcome: TaskOutcome | None) -> bool:
    return outcome is None or outcome.status in ENDED


@contextmanager
def task_waiter():
    """Listen for task ends before preparing a task: its end cannot then be missed, and the
    usual end (a short response, carried by the notification) needs no read at all::

        with task_waiter() as wait:
            outcome = wait(process_task_prepare(...))
    """
    since = blocking_hub.listening(TASK_DONE_CHANNEL)
    yield lambda task: wait_for_task(task.task_id, timeout=task.timeout, since=since)


def wait_for_task(task_id: int, *, timeout: float, since: Listening | None = None) -> TaskOutcome | None:
    """Wait (on a NOTIFY, holding no connection) until a task has ended; None if its process
    was removed. Without ``since`` (see ``task_waiter``) the task is read before waiting."""
    deadline = time.monotonic() + timeout
    with blocking_hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)], since=since) as subscription:
        outcome = task_outcome(task_id) if since is None else False
        while outcome is False or not _ended(outcome):
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepTimeoutError("timeout")
            subscription.wait_blocking(min(left, RECHECK_SEC))  # woken or not, look: a NOTIFY may be lost
            outcome = _notified_outcome(subscription, task_id)
            if outcome is False:
                outcome = task_outcome(task_id)
        return outcome


@asynccontextmanager
async def task_waiter_async():
    """``task_waiter`` for async views: waits on the event loop, holding no thread, and a pooled
    connection only when it has to read."""
    async with waiting_resources() as resources:
        since = await resources.hub.listening(TASK_DONE_CHANNEL)

        async def wait(task: PreparedTask) -> TaskOutcome | None:
            return await wait_for_task_async(task.task_id, timeout=task.timeout, since=since, resources=resources)

        yield wait


async def wait_for_task_async(
    task_id: int, *, timeout: float, since: Listening | None = None, resources: WaitingResources | None = None
) -> TaskOutcome | None:
    """``wait_for_task`` on the event loop."""
    if resources is None:
        async with waiting_resources() as own:
            return await wait_for_task_async(task_id, timeout=timeout, resources=own)

    async def read() -> TaskOutcome | None:
        async with resources.pool.connection() as conn:
            row = await (await conn.execute(_OUTCOME, [task_id])).fetchone()
        return None if row is None else TaskOutcome(row[0], row[1], row[2])

    deadline = time.monotonic() + timeout
    async with resources.hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)], since=since) as subscription:
        outcome = await read() if since is None else False
        while outcome is False or not _ended(outcome):
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepTimeoutError("timeout")
            await subscription.wait(min(left, RECHECK_SEC))
            outcome = _notified_outcome(subscription, task_id)
            if outcome is False:
                outcome = await read()
        return outcome


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
    history in ``history_range``, aggregated), with its parameters; read by :func:`view_from`.
    The history is built as json, not jsonb: it is only sent, and jsonb would be built, sorted
    and printed again (a fifth of the server's time on a call of a process with a long history)."""
    backward = history_range.get("direction") == "backward"
    sql = f"""
        p.process_id, p.namespace, p.status, p.detail, p.aux_state, p.metadata, p.last_event_id,
        (SELECT coalesce(json_agg(json_build_object(
                    'event_id', e.event_id, 'task_id', e.task_id, 'timestamp', e.timestamp,
                    'metadata', e.metadata, 'payload', e.payload) ORDER BY e.n), '[]'::json)
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
