"""Importing a process as it was elsewhere (progressor's put)."""

from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.processes import registry
from jobs.processes.inputs import check_json, check_process_id
from jobs.processes.models import MAX_EVENT_ID, Process, Task
from jobs.processes.services._common import dumps, event_time, schedule_task, timer_time
from pipeline_project.core import sql
from pipeline_project.core.errors import ConflictError, InvalidInputError


def process_put(*, namespace: str, process_id: str, process: dict, action: Any = None) -> None:
    """Import a process as it was elsewhere: its status, detail, aux_state, metadata and history
    (events with their ids), recorded as one finished ``init`` task (metadata ``kind: put``),
    and optionally an action: ``{"set_timer": ..., "remove": true?}`` or ``"remove"``."""
    registry.require(namespace)
    check_process_id(process_id)
    imported = _put_problems(process, action, process_id=process_id)
    with transaction.atomic():
        now = timezone.now()
        try:
            with transaction.atomic():
                row = Process.objects.create(
                    namespace=namespace,
                    process_id=process_id,
                    status=imported["status"],
                    detail=imported["detail"],
                    aux_state=imported["aux_state"],
                    metadata=imported["metadata"],
                    last_event_id=max((event["event_id"] for event in imported["history"]), default=0),
                    status_changed_at=now,
                    created_at=now,
                )
        except IntegrityError:
            raise ConflictError("process already exists", code="process_exists") from None
        task = Task.objects.create(
            process=row,
            task_type="init",
            status="finished",
            scheduled_time=now,
            running_time=now,
            finished_time=now,
            metadata={"kind": "put"},
            response="ok",
        )
        sql.execute(
            """
            INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, payload, metadata)
            SELECT %s, %s, (e ->> 'event_id')::int, coalesce((e ->> 'timestamp')::timestamptz, now()),
                   e -> 'payload', e -> 'metadata'
            FROM jsonb_array_elements(%s::jsonb) AS e
            """,
            [row.id, task.task_id, dumps(imported["history"])],
        )
        if action == "remove":
            row.delete()
        elif imported["timer_at"] is not None:
            schedule_task(row, "remove" if imported["timer_removes"] else "timeout", at=imported["timer_at"])


def _put_problems(process: Any, action: Any, *, process_id: str) -> dict:
    """A put's process and action, checked (400 naming what is wrong)."""
    fields = {"process_id", "status", "detail", "aux_state", "metadata", "history"}
    if not isinstance(process, dict) or set(process) - fields:
        raise InvalidInputError(f"process must be an object with {', '.join(sorted(fields))}")
    if process.get("process_id", process_id) != process_id:
        raise InvalidInputError("process.process_id differs from the process id in the request")
    status = process.get("status", "running")
    if status not in ("init", "running", "error"):
        raise InvalidInputError("process status must be init, running or error")
    history = process.get("history") or []
    ids = [event.get("event_id") if isinstance(event, dict) else None for event in history]
    if any(isinstance(i, bool) or not isinstance(i, int) or not 1 <= i <= MAX_EVENT_ID for i in ids) or len(
        set(ids)
    ) != len(ids):
        raise InvalidInputError(f"each history event needs a distinct integer event_id from 1 to {MAX_EVENT_ID}")
    for event in history:
        if set(event) - {"event_id", "timestamp", "payload", "metadata"}:
            raise InvalidInputError("history events have event_id, timestamp, payload and metadata only")
        if "timestamp" in event and event_time(event["timestamp"]) is None:
            raise InvalidInputError("event timestamps are Unix seconds or ISO 8601 with a time zone")
    history = [
        {**event, "timestamp": event_time(event["timestamp"]).isoformat()} if "timestamp" in event else event
        for event in history
    ]
    check_json("process", process)
    timer_at, removes = None, False
    if isinstance(action, dict) and "set_timer" in action and set(action) <= {"set_timer", "remove"}:
        timer_at, removes = timer_time(action["set_timer"]), bool(action.get("remove"))
        if timer_at is None:
            raise InvalidInputError("set_timer is seconds from now or an ISO 8601 time with a time zone")
    elif action not in (None, "remove"):
        raise InvalidInputError('action is {"set_timer": ..., "remove": true?} or "remove"')
    return {
        "status": status,
        "detail": process.get("detail"),
        "aux_state": process.get("aux_state"),
        "metadata": process.get("metadata"),
        "history": history,
        "timer_at": timer_at,
        "timer_removes": removes,
    }
