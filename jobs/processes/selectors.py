"""Reads of durable processes: a process with its history, and its full trace."""

import time
from typing import Any

from jobs.processes.models import TASK_DONE_CHANNEL, Event, Process, Schedule, Task
from jobs.processes.registry import ProcessView, require
from pipeline_project.core.errors import ApplicationError, InvalidInputError, NotFoundError
from pipeline_project.core.notifications import blocking_hub

DIRECTIONS = ("forward", "backward")
ENDED = ("finished", "error", "cancelled")


class StepTimeoutError(ApplicationError):
    status_code = 504
    code = "timeout"


def wait_for_task(task_id: int, *, timeout: float) -> Task | None:
    """Wait (on a NOTIFY, holding no connection) until a task has ended; None if its process was removed."""
    deadline = time.monotonic() + timeout
    with blocking_hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)]) as subscription:
        while True:
            task = Task.objects.filter(task_id=task_id).first()
            if task is None or task.status in ENDED:
                return task
            left = deadline - time.monotonic()
            if left <= 0:
                raise StepTimeoutError("timeout")
            subscription.wait_blocking(min(left, 5.0))  # re-read now and then: a NOTIFY may be lost


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


def history(process: Process, history_range: dict | None = None) -> list[dict]:
    history_range = history_range_clean(history_range)
    events = Event.objects.filter(process=process)
    offset, limit = history_range.get("offset"), history_range.get("limit")
    if history_range.get("direction", "forward") == "backward":
        if offset:
            events = events.filter(event_id__lt=offset)
        events = events.order_by("-event_id")
    else:
        if offset:
            events = events.filter(event_id__gt=offset)
        events = events.order_by("event_id")
    if limit is not None:
        events = events[:limit]
    return [
        {
            "event_id": event.event_id,
            "task_id": event.task_id,
            "timestamp": event.timestamp.isoformat(),
            "metadata": event.metadata,
            "payload": event.payload,
        }
        for event in events
    ]


def process_view(process: Process, history_range: dict | None = None) -> ProcessView:
    return ProcessView(
        process_id=process.process_id,
        namespace=process.namespace,
        status=process.status,
        detail=process.detail,
        aux_state=process.aux_state,
        metadata=process.metadata,
        history=history(process, history_range),
        last_event_id=process.last_event_id,
        range=history_range_clean(history_range),
    )


def process_get(*, namespace: str, process_id: str, history_range: dict | None = None) -> dict[str, Any]:
    """The process with its history in ``history_range``; while it is in ``init``, waits for init to end."""
    definition = require(namespace)
    process = _process(namespace, process_id)
    if process.status == "init":
        init = Task.objects.filter(process=process, task_type="init").order_by("task_id").first()
        if init is not None:
            wait_for_task(init.task_id, timeout=definition.process_step_timeout)
        process = _process(namespace, process_id)
    view = process_view(process, history_range)
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
    for event in history(process):
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


def process_by_pk(pk: int) -> Process | None:
    return Process.objects.filter(id=pk).first()


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
