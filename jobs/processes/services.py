"""State changes of durable processes: what clients ask for, and what workers do with tasks.

Clients (the service API, the HTTP API) add tasks: ``process_init``, ``process_call``,
``process_repair`` put a task in the schedule and wait for its result on a NOTIFY;
``process_simple_repair`` changes the process at once. Workers claim due tasks
(``tasks_claim``: at most one running task per process, calls before timers) and record how
each ended (``task_complete``), in one transaction with every change it implies: events,
the process's new state, the timer it set, the calls it unblocked, the retry or the error.
"""

import json
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.processes import metrics, registry
from jobs.processes.models import (
    CALL_TYPES,
    MAX_EVENT_ID,
    MAX_PROCESS_ID_CHARS,
    TASK_DONE_CHANNEL,
    TIMER_TYPES,
    WORK_CHANNEL,
    Process,
    Task,
)
from jobs.processes.registry import ProcessView
from jobs.processes.selectors import (
    PreparedTask,
    StepTimeoutError,
    TaskOutcome,
    history_range_clean,
    task_waiter,
    view_from,
    view_select,
)
from jobs.services._db import _execute, _json, _rows
from pipeline_project.core.errors import ApplicationError, ConflictError, InvalidInputError, NotFoundError
from pipeline_project.core.storable import json_problem


class ProcessorError(ApplicationError):
    """The processor answered a call (or init, or repair) with an error; ``reason`` is its answer."""

    status = 422
    code = "processor_error"


@dataclass(frozen=True)
class ClaimedTask:
    task_id: int
    process_pk: int
    task_type: str
    args: Any
    context: Any
    attempts_count: int
    last_retry_interval: float
    view: ProcessView  # the process as its processor sees it, read with the claim


# --- clients ---------------------------------------------------------------------------------


def process_init(*, namespace: str, process_id: str, args: Any = None, idempotency_key: str | None = None) -> Any:
    """Create a process and run its init task; return the processor's response."""
    with task_waiter() as wait:
        task = process_init_prepare(
            namespace=namespace, process_id=process_id, args=args, idempotency_key=idempotency_key
        )
        return task_result(wait(task))


def process_call(*, namespace: str, process_id: str, args: Any = None, idempotency_key: str | None = None) -> Any:
    """Run a call on a running process and return the processor's response.

    A call that arrives while another task of the process runs waits for it and runs next,
    before any timer; the process's timers are blocked until the call has run.
    """
    with task_waiter() as wait:
        task = process_task_prepare(
            "call", namespace=namespace, process_id=process_id, args=args, idempotency_key=idempotency_key
        )
        return task_result(wait(task))


def process_repair(*, namespace: str, process_id: str, args: Any = None, idempotency_key: str | None = None) -> Any:
    """Run the processor with task type ``repair`` on a process in ``error``."""
    with task_waiter() as wait:
        task = process_task_prepare(
            "repair", namespace=namespace, process_id=process_id, args=args, idempotency_key=idempotency_key
        )
        return task_result(wait(task))


def process_init_prepare(
    *, namespace: str, process_id: str, args: Any = None, idempotency_key: str | None = None
) -> PreparedTask:
    """A new process with its init task waiting (or the task an idempotency key names)."""
    definition = registry.require(namespace)
    _check_process_id(process_id)
    _check_json("args", args)
    started = time.perf_counter()
    task_id = _replayed(idempotency_key)
    if task_id is None:
        try:
            with transaction.atomic():
                now = timezone.now()
                process = Process.objects.create(
                    namespace=namespace, process_id=process_id, status="init", status_changed_at=now, created_at=now
                )
                task_id = _schedule_task(process, "init", args=args, idempotency_key=idempotency_key, at=now)
        except IntegrityError as exc:
            task_id = _replayed(idempotency_key)
            if task_id is None:
                if "ux_dl_processes_ns_id" in str(exc):
                    raise ConflictError("process already exists", code="process_exists") from None
                raise
    return _prepared(task_id, "init", definition, started)


# A client's call or repair, in one statement: the process is locked and its status checked,
# the task goes into the schedule, the process's timers are blocked until it has run, and
# the namespace's workers are told. Its commit need not wait for the disk: the caller is
# answered only after the task's end is committed, which flushes this too; a task lost in a
# crash was never answered. (Committing a NOTIFY holds a server-wide lock: no fsync under it.)
_PREPARE = """
WITH p AS (
    SELECT id, status FROM dl_processes WHERE namespace = %(namespace)s AND process_id = %(process_id)s FOR UPDATE
),
task AS (
    INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, args, idempotency_key,
                               last_retry_interval, attempts_count)
    SELECT p.id, %(type)s, 'waiting', now(), %(args)s::jsonb, %(key)s, 0, 0 FROM p WHERE p.status = %(wanted)s
    RETURNING task_id, process_pk, scheduled_time
),
scheduled AS (
    INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
    SELECT task_id, process_pk, %(namespace)s, %(type)s, 'waiting', scheduled_time FROM task
),
blocked AS (
    UPDATE dl_proc_schedule s SET status = 'blocked' FROM task
    WHERE s.process_pk = task.process_pk AND s.status = 'waiting' AND s.task_type IN ('timeout', 'remove')
    RETURNING s.task_id
),
blocked_tasks AS (
    UPDATE dl_proc_tasks t SET status = 'blocked', blocked_task = (SELECT task_id FROM task)
    FROM blocked b WHERE t.task_id = b.task_id
)
SELECT (SELECT status FROM p), task_id, pg_notify(%(channel)s, %(namespace)s || '@' || extract(epoch FROM scheduled_time)),
       set_config('synchronous_commit', 'off', true)
FROM (SELECT 1) AS one LEFT JOIN task ON true
"""


def process_task_prepare(
    task_type: str, *, namespace: str, process_id: str, args: Any = None, idempotency_key: str | None = None
) -> PreparedTask:
    """A call (on a running process) or repair (on one in error) waiting in the schedule, or
    the task an idempotency key names. The process's timers are blocked until it has run
    (then its result sets, cancels or unblocks them)."""
    definition = registry.require(namespace)
    _check_json("args", args)
    started = time.perf_counter()
    task_id = _replayed(idempotency_key)
    if task_id is None:
        wanted = "error" if task_type == "repair" else "running"
        try:
            [(status, task_id, _notified, _async)] = _rows(
                _PREPARE,
                {
                    "namespace": namespace,
                    "process_id": process_id,
                    "type": task_type,
                    "args": _dumps(args),
                    "key": idempotency_key,
                    "wanted": wanted,
                    "channel": WORK_CHANNEL,
                },
            )
        except IntegrityError:
            task_id = _replayed(idempotency_key)
            if task_id is None:
                raise
        else:
            if status is None:
                raise NotFoundError("process not found", code="process_not_found")
            if task_id is None:
                raise ConflictError(f"process is {status}", code=f"process_{status}")
    return _prepared(task_id, task_type, definition, started)


def _prepared(task_id: int, task_type: str, definition: registry.Namespace, started: float) -> PreparedTask:
    """A client's task in the schedule; its preparation time goes to progressor's histogram."""
    metrics.REQUEST_PREPARING.labels(namespace=definition.name, task_type=task_type).observe(
        (time.perf_counter() - started) * 1000
    )
    return PreparedTask(task_id, definition.process_step_timeout)


def process_simple_repair(*, namespace: str, process_id: str, context: Any = None) -> None:
    """Put a process in ``error`` back to ``running`` without its processor.

    If a timeout or remove task corrupted it, that task is scheduled again (metadata
    ``kind: simple_repair``, the given context).
    """
    registry.require(namespace)
    _check_json("context", context)
    with transaction.atomic():
        process = _locked_process(namespace, process_id)
        if process.status != "error":
            raise ConflictError(f"process is {process.status}", code=f"process_{process.status}")
        corrupting = Task.objects.filter(task_id=process.corrupted_by).first() if process.corrupted_by else None
        if corrupting is not None and corrupting.task_type in TIMER_TYPES:
            _schedule_task(
                process,
                corrupting.task_type,
                args=corrupting.args,
                metadata={"kind": "simple_repair"},
                context=context,
                at=timezone.now(),
            )
        _set_status(process, "running")
        process.detail = None
        process.corrupted_by = None
        process.save()


def process_put(*, namespace: str, process_id: str, process: dict, action: Any = None) -> None:
    """Import a process as it was elsewhere: its status, detail, aux_state, metadata and history
    (events with their ids), recorded as one finished ``init`` task (metadata ``kind: put``),
    and optionally an action: ``{"set_timer": ..., "remove": true?}`` or ``"remove"``."""
    registry.require(namespace)
    _check_process_id(process_id)
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
        _execute(
            """
            INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, payload, metadata)
            SELECT %s, %s, (e ->> 'event_id')::int, coalesce((e ->> 'timestamp')::timestamptz, now()),
                   e -> 'payload', e -> 'metadata'
            FROM jsonb_array_elements(%s::jsonb) AS e
            """,
            [row.id, task.task_id, _dumps(imported["history"])],
        )
        if action == "remove":
            row.delete()
        elif imported["timer_at"] is not None:
            _schedule_task(row, "remove" if imported["timer_removes"] else "timeout", at=imported["timer_at"])


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
        if "timestamp" in event and _event_time(event["timestamp"]) is None:
            raise InvalidInputError("event timestamps are Unix seconds or ISO 8601 with a time zone")
    history = [
        {**event, "timestamp": _event_time(event["timestamp"]).isoformat()} if "timestamp" in event else event
        for event in history
    ]
    _check_json("process", process)
    timer_at, removes = None, False
    if isinstance(action, dict) and "set_timer" in action and set(action) <= {"set_timer", "remove"}:
        timer_at, removes = _timer_time(action["set_timer"]), bool(action.get("remove"))
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


def _replayed(idempotency_key: str | None) -> int | None:
    if idempotency_key is None:
        return None
    return Task.objects.filter(idempotency_key=idempotency_key).values_list("task_id", flat=True).first()


def task_result(outcome: TaskOutcome | None) -> Any:
    """A client task's answer: the processor's response, or the error it amounts to."""
    if outcome is None:  # the task removed its own process
        return "ok"
    if outcome.status == "finished":
        return outcome.response
    if outcome.status == "cancelled":
        raise ConflictError(f"process is {outcome.process_status}", code=f"process_{outcome.process_status}")
    raise ProcessorError(_reason(outcome.response), details={"reason": outcome.response})


def _reason(response: Any) -> str:
    if isinstance(response, dict) and "error" in response:
        return str(response["error"])
    return str(response)


# --- workers ---------------------------------------------------------------------------------

CLAIM_WINDOW = 256


def tasks_claim(*, namespace: str, limit: int, worker: str, history_range: dict | None = None) -> list[ClaimedTask]:
    """Claim up to ``limit`` due tasks of a namespace, at most one per process, none of a
    process that runs one; a process's calls go before its timers.

    Two workers that pick different tasks of one process at once both try to insert its
    ``dl_proc_running`` row; its primary key lets one win, and the other's statement fails
    with a unique violation (``is_running_race``) and simply claims again.
    """
    history_range = history_range_clean(history_range)
    view_columns, view_params = view_select(history_range)
    rows = _rows(
        f"""
        WITH candidates AS MATERIALIZED (
            SELECT s.task_id, s.process_pk, s.task_type FROM dl_proc_schedule s
            WHERE s.namespace = %(namespace)s AND s.status = 'waiting' AND s.scheduled_time <= now()
              AND NOT EXISTS (SELECT 1 FROM dl_proc_running r WHERE r.process_pk = s.process_pk)
            ORDER BY s.scheduled_time, s.task_id
            LIMIT %(window)s
        ),
        picked AS (
            SELECT * FROM (
                SELECT DISTINCT ON (process_pk) * FROM candidates
                ORDER BY process_pk, task_type IN ('timeout', 'remove'), task_id
            ) AS one_per_process
            ORDER BY task_id LIMIT %(limit)s
        ),
        locked AS (  -- only the picked rows: a row lock is a write; another worker's are skipped
            SELECT s.task_id FROM dl_proc_schedule s JOIN picked USING (task_id)
            WHERE s.status = 'waiting'
            FOR UPDATE OF s SKIP LOCKED
        ),
        unscheduled AS (
            DELETE FROM dl_proc_schedule s USING locked l WHERE s.task_id = l.task_id
            RETURNING s.task_id, s.process_pk, s.task_type, s.namespace
        ),
        started AS (
            INSERT INTO dl_proc_running (process_pk, task_id, namespace, task_type, running_time, worker)
            SELECT process_pk, task_id, namespace, task_type, now(), %(worker)s FROM unscheduled
            RETURNING task_id
        ),
        claimed AS (
            UPDATE dl_proc_tasks t SET status = 'running', running_time = now()
            FROM started WHERE t.task_id = started.task_id
            RETURNING t.task_id, t.process_pk, t.task_type, t.args, t.context, t.attempts_count, t.last_retry_interval
        )
        SELECT c.*, {view_columns} FROM claimed c JOIN dl_processes p ON p.id = c.process_pk
        """,
        {"namespace": namespace, "window": CLAIM_WINDOW, "limit": limit, "worker": worker, **view_params},
    )
    return [
        ClaimedTask(
            task_id,
            process_pk,
            task_type,
            _json(args),
            _json(context),
            attempts,
            float(interval),
            view=view_from(view, history_range),
        )
        for task_id, process_pk, task_type, args, context, attempts, interval, *view in rows
    ]


def is_running_race(exc: IntegrityError) -> bool:
    return "dl_proc_running_pkey" in str(exc)


@dataclass(frozen=True)
class Result:
    """A processor's answer, validated (see ``registry``)."""

    events: list[dict]
    response: Any
    aux_state: Any
    metadata: Any
    keep_aux_state: bool
    keep_metadata: bool
    action: str | None  # None, set_timer, unset_timer, remove
    timer_at: datetime | None = None
    timer_removes: bool = False


def result_parse(value: Any) -> Result | str:
    """The processor's return value as a Result, or the error reason it amounts to."""
    if not isinstance(value, dict):
        return "unsupported_result"
    if "error" in value:
        return str(value["error"]) if not isinstance(value["error"], str) else value["error"]
    if set(value) - {"events", "response", "aux_state", "metadata", "action"}:
        return "unsupported_result"
    events = []
    for event in value.get("events") or []:
        if isinstance(event, dict) and set(event) <= {"payload", "metadata"} and "payload" in event:
            events.append({"payload": event["payload"], "metadata": event.get("metadata")})
        else:
            events.append({"payload": event, "metadata": None})
    if json_problem([events, value.get("response"), value.get("aux_state"), value.get("metadata")]):
        return "unsupported_result"
    action, timer_at, removes = value.get("action"), None, False
    if isinstance(action, dict) and "set_timer" in action and set(action) <= {"set_timer", "remove"}:
        timer_at = _timer_time(action["set_timer"])
        if timer_at is None:
            return "unsupported_result"
        action, removes = "set_timer", bool(action.get("remove"))
    elif action not in (None, "unset_timer", "remove"):
        return "unsupported_result"
    return Result(
        events=events,
        response=value.get("response", "ok"),
        aux_state=value.get("aux_state"),
        metadata=value.get("metadata"),
        keep_aux_state="aux_state" not in value,
        keep_metadata="metadata" not in value,
        action=action,
        timer_at=timer_at,
        timer_removes=removes,
    )


def _event_time(value: Any) -> datetime | None:
    """An imported event's time: Unix seconds (as progressor exports them) or ISO 8601."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return _timer_time(value) if isinstance(value, str) else None


def _timer_time(value: Any) -> datetime | None:
    """A timer's time: seconds from now, an aware datetime or ISO 8601 text; None if it is none
    of these or out of range (a processor's or client's mistake, not a crash)."""
    try:
        if isinstance(value, bool):
            return None
        if isinstance(value, int | float):
            return timezone.now() + timedelta(seconds=value)
        if isinstance(value, datetime):
            return value if timezone.is_aware(value) else None
        if isinstance(value, str):
            parsed = parse_datetime(value)
            return parsed if parsed is not None and timezone.is_aware(parsed) else None
    except (OverflowError, ValueError):  # huge or NaN seconds; a well-formed but impossible date
        return None
    return None


def task_complete(*, task: ClaimedTask, namespace: str, outcome: Result | str) -> str:
    """Record how a task ended (a Result, or an error reason); return the completion type:
    ``complete_and_continue`` (a timer set), ``complete_and_suspend`` (timers unset, or the
    process removed), ``complete_and_unlock`` (no action: blocked timers unblocked) or
    ``complete_and_error``."""
    if isinstance(outcome, Result) and outcome.action != "remove":
        _succeeded(task, namespace, outcome)
        return (
            "complete_and_continue"
            if outcome.action == "set_timer"
            else ("complete_and_suspend" if outcome.action == "unset_timer" else "complete_and_unlock")
        )
    with transaction.atomic():
        process = Process.objects.select_for_update().filter(id=task.process_pk).first()
        if process is None:
            return "complete_and_suspend"  # removed meanwhile
        if isinstance(outcome, Result):  # the remove action
            process.delete()
            completion = "complete_and_suspend"
        else:
            _failed(process, task, outcome, registry.get(namespace))
            completion = "complete_and_error"
        # Workers look now (a call may wait behind this task) and learn when unblocked timers fall due.
        _execute(
            """
            SELECT pg_notify(%(done)s, %(task)s::text), pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM now())),
                   (SELECT pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM min(scheduled_time)))
                    FROM dl_proc_schedule WHERE process_pk = %(process)s AND status = 'waiting' HAVING count(*) > 0)
            """,
            {
                "done": TASK_DONE_CHANNEL,
                "task": task.task_id,
                "work": WORK_CHANNEL,
                "namespace": namespace,
                "process": task.process_pk,
            },
        )
    return completion


def task_remove_process(*, task: ClaimedTask, namespace: str) -> None:
    """A remove timer: the process and all its rows go."""
    with transaction.atomic():
        Process.objects.filter(id=task.process_pk).delete()
        _execute("SELECT pg_notify(%s, %s)", [TASK_DONE_CHANNEL, str(task.task_id)])


NOTIFIED_OUTCOME_MAX_BYTES = 2000  # the listener remembers its latest notifications: keep them small

# A task that succeeded, in one statement (the hot path of every call): its events, the
# process's new state, the timer change its action asks for (set: the earlier timers are
# cancelled and a new one scheduled; unset: cancelled; none: the timers a call blocked are
# unblocked), the task ended, and the notifications: the caller's (with the outcome, when
# short enough to spare the caller a read), and the workers' (look
# now if a task of the process waits, due, behind this one; and when new or unblocked timers fall due).
_SUCCEEDED = """
WITH p AS (
    SELECT id, status, last_event_id, corrupted_by,
           (%(task_type)s = 'repair' OR status = 'init') AS to_running
    FROM dl_processes WHERE id = %(process)s FOR UPDATE
),
events AS (
    INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, payload, metadata)
    SELECT p.id, %(task)s, p.last_event_id + x.n, now(), x.e -> 'payload', x.e -> 'metadata'
    FROM p, jsonb_array_elements(%(events)s::jsonb) WITH ORDINALITY AS x(e, n)
),
updated AS (
    UPDATE dl_processes d SET
        aux_state = CASE WHEN %(keep_aux_state)s THEN d.aux_state ELSE %(aux_state)s::jsonb END,
        metadata = CASE WHEN %(keep_metadata)s THEN d.metadata ELSE %(metadata)s::jsonb END,
        last_event_id = d.last_event_id + %(event_count)s,
        previous_status = CASE WHEN p.to_running AND d.status <> 'running' THEN d.status ELSE d.previous_status END,
        status_changed_at = CASE WHEN p.to_running AND d.status <> 'running' THEN now() ELSE d.status_changed_at END,
        status = CASE WHEN p.to_running THEN 'running' ELSE d.status END,
        detail = CASE WHEN p.to_running THEN NULL ELSE d.detail END,
        corrupted_by = CASE WHEN p.to_running THEN NULL ELSE d.corrupted_by END
    FROM p WHERE d.id = p.id
),
cancelled AS (
    DELETE FROM dl_proc_schedule s USING p
    WHERE %(action)s IN ('set_timer', 'unset_timer') AND s.process_pk = p.id AND s.task_type IN ('timeout', 'remove')
    RETURNING s.task_id
),
cancelled_tasks AS (
    UPDATE dl_proc_tasks t SET status = 'cancelled', finished_time = now() FROM cancelled c WHERE t.task_id = c.task_id
),
unblocked AS (
    UPDATE dl_proc_schedule s SET status = 'waiting' FROM p
    WHERE %(action)s = 'none' AND s.process_pk = p.id AND s.status = 'blocked'
    RETURNING s.task_id, s.scheduled_time
),
unblocked_tasks AS (UPDATE dl_proc_tasks t SET status = 'waiting' FROM unblocked u WHERE t.task_id = u.task_id),
new_timer AS (
    INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, last_retry_interval, attempts_count)
    SELECT p.id, %(timer_type)s, 'waiting', %(timer_at)s, 0, 0 FROM p WHERE %(action)s = 'set_timer'
    RETURNING task_id, process_pk, task_type, scheduled_time
),
new_schedule AS (
    INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
    SELECT task_id, process_pk, %(namespace)s, task_type, 'waiting', scheduled_time FROM new_timer
),
unrun AS (DELETE FROM dl_proc_running WHERE task_id = %(task)s),
ended AS (
    UPDATE dl_proc_tasks SET status = 'finished', response = %(response)s::jsonb, finished_time = now()
    WHERE task_id = %(task)s
)
SELECT (SELECT corrupted_by FROM p),
       pg_notify(%(done)s, %(task)s::text || coalesce((
           SELECT E'\n' || o.outcome FROM p, LATERAL (
               SELECT jsonb_build_array('finished', %(response)s::jsonb,
                                        CASE WHEN p.to_running THEN 'running' ELSE p.status END)::text AS outcome
           ) AS o WHERE octet_length(o.outcome) <= %(notified_max)s), '')),
       (SELECT pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM now()))
        WHERE EXISTS (SELECT 1 FROM dl_proc_schedule WHERE process_pk = %(process)s AND status = 'waiting'
                      AND scheduled_time <= now())),
       (SELECT pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM min(due)))
        FROM (SELECT scheduled_time AS due FROM new_timer UNION ALL SELECT scheduled_time FROM unblocked) AS timers
        HAVING count(*) > 0)
"""


def _succeeded(task: ClaimedTask, namespace: str, result: Result) -> None:
    rows = _rows(
        _SUCCEEDED,
        {
            "process": task.process_pk,
            "task": task.task_id,
            "task_type": task.task_type,
            "events": _dumps(result.events),
            "event_count": len(result.events),
            "keep_aux_state": result.keep_aux_state,
            "aux_state": _dumps(result.aux_state),
            "keep_metadata": result.keep_metadata,
            "metadata": _dumps(result.metadata),
            "action": result.action or "none",
            "timer_type": "remove" if result.timer_removes else "timeout",
            "timer_at": result.timer_at,
            "response": _dumps(result.response),
            "namespace": namespace,
            "done": TASK_DONE_CHANNEL,
            "notified_max": NOTIFIED_OUTCOME_MAX_BYTES,
            "work": WORK_CHANNEL,
        },
    )
    corrupting = rows[0][0] if rows else None
    if task.task_type == "repair" and corrupting and result.action != "set_timer":
        # A repaired timeout runs again.
        with transaction.atomic():
            timeout = Task.objects.filter(task_id=corrupting, task_type="timeout").first()
            process = Process.objects.filter(id=task.process_pk).first()
            if timeout is not None and process is not None:
                _schedule_task(process, "timeout", args=timeout.args, at=timezone.now())


def _failed(process: Process, task: ClaimedTask, reason: str, definition: registry.Namespace | None) -> None:
    if task.task_type == "repair":  # the process stays as it was
        _end_task(task, status="error", response={"error": reason})
        return
    if task.task_type == "timeout" and definition is not None:
        attempts = task.attempts_count + 1
        delay = definition.retry_policy.next_delay(
            attempts=attempts, last_delay=task.last_retry_interval, reason=reason
        )
        if delay is not None:
            _execute(
                """
                WITH retried AS (
                    UPDATE dl_proc_tasks SET status = 'waiting', attempts_count = %(attempts)s,
                        last_retry_interval = %(delay)s, scheduled_time = now() + make_interval(secs => %(delay)s),
                        response = jsonb_build_object('error', %(reason)s::text)
                    WHERE task_id = %(task)s
                    RETURNING task_id, process_pk, task_type, scheduled_time
                ),
                unrun AS (DELETE FROM dl_proc_running WHERE task_id = %(task)s)
                INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
                SELECT task_id, process_pk, %(namespace)s, task_type, 'waiting', scheduled_time FROM retried
                """,
                {
                    "attempts": attempts,
                    "delay": delay,
                    "reason": reason,
                    "task": task.task_id,
                    "namespace": process.namespace,
                },
            )
            return
    _set_status(process, "error")
    process.detail = reason
    process.corrupted_by = task.task_id
    process.save()
    _cancel_scheduled(process)
    _end_task(task, status="error", response={"error": reason}, attempts=task.attempts_count + 1)


def zombies_collect(*, namespace: str, older_than_sec: float) -> int:
    """Running tasks older than ``older_than_sec`` (their worker died): each process goes to
    ``error`` (``zombie detected``), its task errs, its other tasks are cancelled."""
    with transaction.atomic():
        rows = _rows(
            """
            DELETE FROM dl_proc_running
            WHERE namespace = %s AND running_time < now() - make_interval(secs => %s)
            RETURNING process_pk, task_id
            """,
            [namespace, older_than_sec],
        )
        for process_pk, task_id in rows:
            process = Process.objects.select_for_update().get(id=process_pk)
            _set_status(process, "error")
            process.detail = "zombie detected"
            process.corrupted_by = task_id
            process.save()
            _cancel_scheduled(process)
            Task.objects.filter(task_id=task_id).update(status="error", finished_time=timezone.now())
            _execute("SELECT pg_notify(%s, %s)", [TASK_DONE_CHANNEL, str(task_id)])
    return len(rows)


# --- helpers ---------------------------------------------------------------------------------


def _check_process_id(process_id: str) -> None:
    if not isinstance(process_id, str) or not 1 <= len(process_id) <= MAX_PROCESS_ID_CHARS or "\x00" in process_id:
        raise InvalidInputError(f"process_id must be 1 to {MAX_PROCESS_ID_CHARS} characters, without NUL")


def _check_json(name: str, value: Any) -> None:
    if problem := json_problem(value):
        raise InvalidInputError(f"{name} cannot be stored: it {problem}")


def _locked_process(namespace: str, process_id: str) -> Process:
    process = Process.objects.select_for_update().filter(namespace=namespace, process_id=process_id).first()
    if process is None:
        raise NotFoundError("process not found", code="process_not_found")
    return process


def _set_status(process: Process, status: str) -> None:
    if process.status != status:
        process.previous_status = process.status
        process.status = status
        process.status_changed_at = timezone.now()


def _schedule_task(
    process: Process, task_type: str, *, at: datetime, args=None, metadata=None, context=None, idempotency_key=None
) -> int:
    """A new task, waiting in the schedule from ``at``; workers of the namespace are told."""
    task_id = _rows(
        """
        WITH task AS (
            INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, args, metadata, context,
                                       idempotency_key, last_retry_interval, attempts_count)
            VALUES (%(process)s, %(type)s, 'waiting', %(at)s, %(args)s, %(metadata)s, %(context)s, %(key)s, 0, 0)
            RETURNING task_id
        ),
        scheduled AS (
            INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
            SELECT task_id, %(process)s, %(namespace)s, %(type)s, 'waiting', %(at)s FROM task
        )
        SELECT task_id, pg_notify(%(channel)s, %(namespace)s || '@' || extract(epoch FROM %(at)s::timestamptz)) FROM task
        """,
        {
            "process": process.id,
            "type": task_type,
            "at": at,
            "args": _dumps(args),
            "metadata": _dumps(metadata),
            "context": _dumps(context),
            "key": idempotency_key,
            "namespace": process.namespace,
            "channel": WORK_CHANNEL,
        },
    )[0][0]
    return task_id


def _cancel_scheduled(process: Process, types: tuple[str, ...] = (*CALL_TYPES, *TIMER_TYPES)) -> None:
    rows = _rows(
        """
        WITH gone AS (
            DELETE FROM dl_proc_schedule WHERE process_pk = %s AND task_type = ANY (%s) RETURNING task_id
        )
        UPDATE dl_proc_tasks t SET status = 'cancelled', finished_time = now() FROM gone
        WHERE t.task_id = gone.task_id RETURNING t.task_id
        """,
        [process.id, list(types)],
    )
    for (task_id,) in rows:  # their callers stop waiting
        _execute("SELECT pg_notify(%s, %s)", [TASK_DONE_CHANNEL, str(task_id)])


def _end_task(task: ClaimedTask, *, status: str, response: Any, attempts: int | None = None) -> None:
    _execute(
        """
        WITH unrun AS (DELETE FROM dl_proc_running WHERE task_id = %s)
        UPDATE dl_proc_tasks SET status = %s, response = %s, finished_time = now(),
            attempts_count = coalesce(%s, attempts_count)
        WHERE task_id = %s
        """,
        [task.task_id, status, _dumps(response), attempts, task.task_id],
    )


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


__all__ = [
    "ClaimedTask",
    "PreparedTask",
    "ProcessorError",
    "Result",
    "StepTimeoutError",
    "is_running_race",
    "process_call",
    "process_init",
    "process_init_prepare",
    "process_put",
    "process_repair",
    "process_simple_repair",
    "process_task_prepare",
    "result_parse",
    "task_complete",
    "task_remove_process",
    "task_result",
    "tasks_claim",
    "zombies_collect",
]
