"""What clients ask for: init, call and repair put a task in the schedule and wait for its end
(on a NOTIFY); simple repair changes the process at once; put imports a process as it was
elsewhere (progressor's put)."""

import functools
import time
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.processes import metrics, namespaces
from jobs.processes.inputs import check_idempotency_key, check_json, check_process_id
from jobs.processes.models import TIMER_TYPES, WORK_CHANNEL, Process, Task
from jobs.processes.ranges import history_range_clean
from jobs.processes.services._common import dumps, locked_process, schedule_task, set_status
from jobs.processes.services.parsing import process_import_parse
from jobs.processes.types import PreparedTask, TaskOutcome
from jobs.processes.waiting import task_waiter
from pipeline_project.api.errors import ApplicationError, ConflictError, NotFoundError
from pipeline_project.db import sql


class ProcessorError(ApplicationError):
    """The processor answered a call (or init, or repair) with an error; ``reason`` is its answer."""

    status = 422
    code = "processor_error"


@dataclass(frozen=True)
class TaskRequest:
    """What a client's init, call or repair carries (progressor's request), checked when made:
    the processor's args, an idempotency key, a context (the processor's ``context``, passed on
    to the timers the task sets) and a history range (see ``ranges``; None: the namespace's)."""

    args: Any = None
    idempotency_key: str | None = None
    context: Any = None
    history_range: dict | None = None

    def __post_init__(self):
        check_json("args", self.args)
        check_json("context", self.context)
        check_idempotency_key(self.idempotency_key)
        object.__setattr__(self, "history_range", history_range_clean(self.history_range))

    @property
    def metadata(self) -> dict | None:
        """The task's metadata: its range, where the claim reads it (as progressor keeps it)."""
        return None if self.history_range is None else {"range": self.history_range}


def process_task_run(
    task_type: str,
    *,
    namespace: str,
    process_id: str,
    args: Any = None,
    idempotency_key: str | None = None,
    context: Any = None,
    history_range: dict | None = None,
) -> Any:
    """Run a client's task on a process and return the processor's response: ``init`` creates
    the process; a ``call`` that arrives while another task of the process runs waits for it
    and runs next, before any timer (the process's timers are blocked until it has run);
    ``repair`` runs on a process in ``error``."""
    request = TaskRequest(args=args, idempotency_key=idempotency_key, context=context, history_range=history_range)
    prepare = process_init_prepare if task_type == "init" else functools.partial(process_task_prepare, task_type)
    with task_waiter() as wait:
        return task_result(wait(prepare(namespace=namespace, process_id=process_id, request=request)))


process_init = functools.partial(process_task_run, "init")
process_call = functools.partial(process_task_run, "call")
process_repair = functools.partial(process_task_run, "repair")


def process_init_prepare(*, namespace: str, process_id: str, request: TaskRequest = TaskRequest()) -> PreparedTask:
    """A new process with its init task waiting (or the task an idempotency key names)."""
    definition = namespaces.require(namespace)
    check_process_id(process_id)
    started = time.perf_counter()
    task_id = _replayed(request.idempotency_key)
    if task_id is None:
        try:
            with transaction.atomic():
                now = timezone.now()
                process = Process.objects.create(
                    namespace=namespace, process_id=process_id, status="init", status_changed_at=now, created_at=now
                )
                task_id = schedule_task(
                    process,
                    "init",
                    args=request.args,
                    metadata=request.metadata,
                    context=request.context,
                    idempotency_key=request.idempotency_key,
                    at=now,
                )
        except IntegrityError as exc:
            task_id = _replayed(request.idempotency_key)
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
    INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, args, metadata, context,
                               idempotency_key, last_retry_interval, attempts_count)
    SELECT p.id, %(type)s, 'waiting', now(), %(args)s::jsonb, %(metadata)s::jsonb, %(context)s::jsonb, %(key)s, 0, 0
    FROM p WHERE p.status = %(wanted)s
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
    task_type: str, *, namespace: str, process_id: str, request: TaskRequest = TaskRequest()
) -> PreparedTask:
    """A call (on a running process) or repair (on one in error) waiting in the schedule, or
    the task an idempotency key names. The process's timers are blocked until it has run
    (then its result sets, cancels or unblocks them)."""
    definition = namespaces.require(namespace)
    check_process_id(process_id)
    started = time.perf_counter()
    task_id = _replayed(request.idempotency_key)
    if task_id is None:
        wanted = "error" if task_type == "repair" else "running"
        try:
            [(status, task_id, _notified, _async)] = sql.rows(
                _PREPARE,
                {
                    "namespace": namespace,
                    "process_id": process_id,
                    "type": task_type,
                    "args": dumps(request.args),
                    "metadata": dumps(request.metadata),
                    "context": dumps(request.context),
                    "key": request.idempotency_key,
                    "wanted": wanted,
                    "channel": WORK_CHANNEL,
                },
            )
        except IntegrityError:
            task_id = _replayed(request.idempotency_key)
            if task_id is None:
                raise
        else:
            if status is None:
                raise NotFoundError("process not found", code="process_not_found")
            if task_id is None:
                raise ConflictError(f"process is {status}", code=f"process_{status}")
    return _prepared(task_id, task_type, definition, started)


def _prepared(task_id: int, task_type: str, definition: namespaces.Namespace, started: float) -> PreparedTask:
    """A client's task in the schedule; its preparation time goes to progressor's histogram."""
    metrics.REQUEST_PREPARING.labels(namespace=definition.name, task_type=task_type).observe(
        (time.perf_counter() - started) * 1000
    )
    return PreparedTask(task_id, definition.process_step_timeout)


def process_simple_repair(*, namespace: str, process_id: str, context: Any = None) -> None:
    """Put a process in ``error`` back to ``running`` without its processor.

    If a timeout or remove task corrupted it, that task is scheduled again (metadata
    ``kind: simple_repair``) with the given context, which its processor gets.
    """
    namespaces.require(namespace)
    check_process_id(process_id)
    check_json("context", context)
    with transaction.atomic():
        process = locked_process(namespace, process_id)
        if process.status != "error":
            raise ConflictError(f"process is {process.status}", code=f"process_{process.status}")
        corrupting = Task.objects.filter(task_id=process.corrupted_by).first() if process.corrupted_by else None
        if corrupting is not None and corrupting.task_type in TIMER_TYPES:
            schedule_task(
                process,
                corrupting.task_type,
                args=corrupting.args,
                metadata={"kind": "simple_repair"},
                context=context,
                at=timezone.now(),
            )
        set_status(process, "running")
        process.detail = None
        process.corrupted_by = None
        process.save()


def process_put(*, namespace: str, process_id: str, process: dict, action: Any = None) -> None:
    """Import a process as it was elsewhere: its status, detail, aux_state, metadata and history
    (events with their ids), recorded as one finished ``init`` task (metadata ``kind: put``),
    and optionally an action: ``{"set_timer": ..., "remove": bool}`` or ``"remove"``. Both come
    in the shape the API's ``PutSerializer`` checks; the import's rules are ``process_import_parse``'s."""
    namespaces.require(namespace)
    check_process_id(process_id)
    imported = process_import_parse(process, action, process_id=process_id)
    with transaction.atomic():
        now = timezone.now()
        try:
            with transaction.atomic():
                row = Process.objects.create(
                    namespace=namespace,
                    process_id=process_id,
                    status=imported.status,
                    detail=imported.detail,
                    aux_state=imported.aux_state,
                    metadata=imported.metadata,
                    last_event_id=max((event["event_id"] for event in imported.history), default=0),
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
            SELECT %(process)s, %(task)s, (e ->> 'event_id')::int, coalesce((e ->> 'timestamp')::timestamptz, now()),
                   e -> 'payload', e -> 'metadata'
            FROM jsonb_array_elements(%(history)s::jsonb) AS e
            """,
            {"process": row.id, "task": task.task_id, "history": dumps(imported.history)},
        )
        if imported.removed:
            row.delete()
        elif imported.timer_at is not None:
            schedule_task(row, "remove" if imported.timer_removes else "timeout", at=imported.timer_at)


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
