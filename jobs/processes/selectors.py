"""Reads of durable processes: a process with its history, its full trace, and the namespaces'
counts.

Every answer is one snapshot: one statement, or reads in one REPEATABLE READ transaction
(``snapshot``), so a change committed between two reads never shows half, and a process
removed between them is a 404, not a crash."""

import functools
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.db.models import Count
from django.utils import timezone

from jobs.processes.inputs import check_process_id
from jobs.processes.models import PROCESS_COUNTS, PROCESS_STATUSES, Event, Process, Running, Schedule, Task
from jobs.processes.namespaces import ProcessView, require
from jobs.processes.namespaces import names as names_registered
from jobs.processes.ranges import history_range_clean
from jobs.processes.types import PreparedTask
from jobs.processes.waiting import wait_for_task
from pipeline_project.api.errors import NotFoundError
from pipeline_project.db import sql
from pipeline_project.db.snapshot import snapshot

_EVENT_JSON = """json_build_object('event_id', e.event_id, 'task_id', e.task_id, 'timestamp', e.timestamp,
                                   'metadata', e.metadata, 'payload', e.payload)"""

# The select-list of a process row ``p`` as a processor sees it, its history apart.
VIEW_COLUMNS = "p.process_id, p.namespace, p.status, p.detail, p.aux_state, p.metadata, p.last_event_id, r.range"

# The history of a process row ``p`` in the range ``r.range`` (jsonb: see ``ranges``), built as
# json, not jsonb: it is only sent, and jsonb would be built, sorted and printed again. Each
# direction is its own index scan under a LIMIT; the one the range does not ask for is skipped
# by its one-time filter.
HISTORY_COLUMN = f"""
    (SELECT coalesce(json_agg({_EVENT_JSON}
                              ORDER BY CASE WHEN r.range ->> 'direction' = 'backward' THEN -e.event_id
                                            ELSE e.event_id END), '[]'::json)
     FROM ((SELECT * FROM dl_proc_events
            WHERE process_pk = p.id AND coalesce(r.range ->> 'direction', 'forward') = 'forward'
              AND event_id > coalesce((r.range ->> 'offset')::bigint, 0)
            ORDER BY event_id LIMIT (r.range ->> 'limit')::bigint)
           UNION ALL
           (SELECT * FROM dl_proc_events
            WHERE process_pk = p.id AND r.range ->> 'direction' = 'backward'
              AND (coalesce((r.range ->> 'offset')::bigint, 0) = 0 OR event_id < (r.range ->> 'offset')::bigint)
            ORDER BY event_id DESC LIMIT (r.range ->> 'limit')::bigint)) AS e)
"""


def view_from(columns: tuple, *, read_history: Callable[[], list[dict]]) -> ProcessView:
    """A ProcessView from the columns :data:`VIEW_COLUMNS` reads; ``read_history`` gives its history."""
    process_id, namespace, status, detail, aux_state, metadata, last_event_id, history_range = columns
    return ProcessView(
        process_id=process_id,
        namespace=namespace,
        status=status,
        detail=detail,
        aux_state=sql.json_value(aux_state),
        metadata=sql.json_value(metadata),
        last_event_id=last_event_id,
        range=sql.json_value(history_range),
        read_history=read_history,
    )


_HISTORY = f"""
SELECT {HISTORY_COLUMN} FROM dl_processes p CROSS JOIN (SELECT %(range)s::jsonb AS range) AS r WHERE p.id = %(process)s
"""


def process_history(*, process_pk: int, history_range: dict) -> list[dict]:
    """A process's events in ``history_range`` (as a claimed task's processor reads them: see
    ``ProcessView``); none if the process is gone."""
    rows = sql.rows(_HISTORY, {"range": json.dumps(history_range), "process": process_pk})
    return sql.json_value(rows[0][0]) if rows else []


_INIT_IN_PROGRESS = """
SELECT p.status, (SELECT min(task_id) FROM dl_proc_tasks t WHERE t.process_pk = p.id AND t.task_type = 'init')
FROM dl_processes p WHERE p.namespace = %(namespace)s AND p.process_id = %(process_id)s
"""


def init_in_progress(*, namespace: str, process_id: str) -> PreparedTask | None:
    """The init task to wait for while the process is in ``init`` (404 if there is no such process)."""
    definition = require(namespace)
    check_process_id(process_id)
    [row] = sql.rows(_INIT_IN_PROGRESS, {"namespace": namespace, "process_id": process_id}) or [None]
    if row is None:
        raise _process_not_found()
    status, init_task_id = row
    return PreparedTask(init_task_id, definition.process_step_timeout) if status == "init" and init_task_id else None


_PROCESS_GET = f"""
SELECT p.previous_status, p.status_changed_at, p.corrupted_by, {VIEW_COLUMNS}, {HISTORY_COLUMN}
FROM dl_processes p CROSS JOIN (SELECT %(range)s::jsonb AS range) AS r
WHERE p.namespace = %(namespace)s AND p.process_id = %(process_id)s
"""


def process_get(
    *, namespace: str, process_id: str, history_range: dict | None = None, wait_for_init: bool = True
) -> dict[str, Any]:
    """The process with its history in ``history_range`` (None: all), read in one statement;
    while it is in ``init``, waits for init to end first."""
    require(namespace)
    check_process_id(process_id)
    history_range = history_range_clean(history_range) or {}
    if wait_for_init and (init := init_in_progress(namespace=namespace, process_id=process_id)):
        wait_for_task(init.task_id, timeout=init.timeout)
    rows = sql.rows(
        _PROCESS_GET, {"range": json.dumps(history_range), "namespace": namespace, "process_id": process_id}
    )
    if not rows:
        raise _process_not_found()
    previous_status, status_changed_at, corrupted_by, *columns, events = rows[0]
    view = view_from(columns, read_history=functools.partial(sql.json_value, events))
    return {
        "namespace": view.namespace,
        "process_id": view.process_id,
        "status": view.status,
        "previous_status": previous_status,
        "status_changed_at": status_changed_at.isoformat(),
        "detail": view.detail,
        "aux_state": view.aux_state,
        "metadata": view.metadata,
        "corrupted_by": corrupted_by,
        "history": view.history,
        "last_event_id": view.last_event_id,
        "range": view.range,
    }


@snapshot()
def process_trace(*, namespace: str, process_id: str) -> list[dict[str, Any]]:
    """Every task of the process in order, with its events."""
    require(namespace)
    check_process_id(process_id)
    process_pk = Process.objects.filter(namespace=namespace, process_id=process_id).values_list("id", flat=True).first()
    if process_pk is None:
        raise _process_not_found()
    events = dict(
        sql.rows(
            f"SELECT e.task_id, json_agg({_EVENT_JSON} ORDER BY e.event_id) FROM dl_proc_events e"
            " WHERE e.process_pk = %(process)s GROUP BY e.task_id",
            {"process": process_pk},
        )
    )
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
            "events": sql.json_value(events.get(task.task_id, "[]")),
        }
        for task in Task.objects.filter(process_id=process_pk).order_by("task_id")
    ]


def _process_not_found() -> NotFoundError:
    return NotFoundError("process not found", code="process_not_found")


def next_scheduled_time(*, namespace: str):
    """When the namespace's next waiting task is due (None: nothing waits)."""
    return (
        Schedule.objects.filter(namespace=namespace, status="waiting")
        .order_by("scheduled_time")
        .values_list("scheduled_time", flat=True)
        .first()
    )


def running_namespaces() -> list[str]:
    """The namespaces with a task running now (the zombie collector's work list)."""
    return list(Running.objects.order_by("namespace").values_list("namespace", flat=True).distinct())


TIMERS_WITHIN_SEC = 3600  # the namespaces' counts show the timers due within the hour


def namespace_health(*, namespace: str) -> dict[str, Any]:
    """A registered namespace's health (404 for an unknown one)."""
    require(namespace)
    return {**namespaces_counts(namespace=namespace)[0], "status": "ok"}


@snapshot()
def namespaces_counts(*, namespace: str | None = None) -> list[dict[str, Any]]:
    """Each namespace (one, or every one registered or holding processes) with its processes by
    status, tasks running now and timers due within the hour."""
    filters = {} if namespace is None else {"namespace": namespace}
    names = [namespace] if namespace is not None else sorted(set(names_registered()) | set(_namespaces_stored()))
    by_status: dict[str, dict[str, int]] = {name: dict.fromkeys(PROCESS_STATUSES, 0) for name in names}
    for name, status, count in process_counts():
        if namespace is None or name == namespace:
            by_status.setdefault(name, dict.fromkeys(PROCESS_STATUSES, 0))[status] = count
    running = _counts_by_namespace(Running.objects.filter(**filters))
    timers = _counts_by_namespace(_timers(within_sec=TIMERS_WITHIN_SEC, **filters))
    return [
        {
            "namespace": name,
            "processes": by_status[name],
            "running_tasks": running.get(name, 0),
            "timers_due_next_hour": timers.get(name, 0),
        }
        for name in sorted(by_status)
    ]


def process_counts() -> list[tuple[str, str, int]]:
    """``(namespace, status, processes)`` for each with processes: from the counts the triggers
    keep (``PROCESS_COUNTS``), not counted."""
    return PROCESS_COUNTS.read()


def _namespaces_stored() -> list[str]:
    return sorted({namespace for namespace, _status, _processes in process_counts()})


def _counts_by_namespace(queryset) -> dict[str, int]:
    return dict(queryset.order_by().values("namespace").annotate(n=Count("pk")).values_list("namespace", "n"))


def timers_due(*, within_sec: float, limit: int) -> list[dict[str, Any]]:
    """Timers (timeout, remove) due within ``within_sec``, soonest first, over every namespace."""
    return list(
        _timers(within_sec=within_sec)
        .order_by("scheduled_time")
        .values("namespace", "process_id", "process__process_id", "task_type", "status", "scheduled_time", "task_id")[
            :limit
        ]
    )


def _timers(*, within_sec: float, **filters):
    return Schedule.objects.filter(
        task_type__in=("timeout", "remove"),
        scheduled_time__lte=timezone.now() + timedelta(seconds=within_sec),
        **filters,
    )


def process_ids(*, namespace: str) -> set[str]:
    """The ids of ``namespace``'s processes."""
    return set(Process.objects.filter(namespace=namespace).values_list("process_id", flat=True))


def _newest_first(rows, *, key: str, up_to: int | None, limit: int) -> tuple[list, int | None]:
    """The newest ``limit`` of ``rows`` by ``key``, from ``up_to`` down (None: the newest), and
    where the next older page starts (None: nothing older): one index range, however many rows."""
    if up_to is not None:
        rows = rows.filter(**{f"{key}__lte": up_to})
    page = list(rows.order_by(f"-{key}")[: limit + 1])
    return page[:limit], getattr(page[limit], key) if len(page) > limit else None


def process_tasks_page(*, process_pk: int, up_to: int | None, limit: int) -> tuple[list[Task], int | None]:
    """A process's tasks, newest first from the task id ``up_to`` (``ix_dl_proc_tasks_process``)."""
    return _newest_first(Task.objects.filter(process_id=process_pk), key="task_id", up_to=up_to, limit=limit)


def process_events_page(*, process_pk: int, up_to: int | None, limit: int) -> tuple[list[Event], int | None]:
    """A process's events with their task's type, newest first from the event id ``up_to``
    (``ux_dl_proc_events_process_event``)."""
    events = Event.objects.filter(process_id=process_pk).select_related("task").defer("task__args", "task__response")
    return _newest_first(events, key="event_id", up_to=up_to, limit=limit)


SCHEDULED_SHOWN = 20  # a process has a timer or two and the calls waiting behind its running task


def process_pending(*, process_pk: int) -> dict[str, Any]:
    """What a process runs now (its ``Running`` row, or None) and what waits in its schedule, soonest first."""
    return {
        "running": Running.objects.filter(process_id=process_pk).first(),
        "scheduled": list(
            Schedule.objects.filter(process_id=process_pk).order_by("scheduled_time", "task_id")[:SCHEDULED_SHOWN]
        ),
    }


def task_type_of(*, task_id: int | None) -> str | None:
    """The type of the task ``task_id`` (None: no such task)."""
    if task_id is None:
        return None
    return Task.objects.filter(task_id=task_id).values_list("task_type", flat=True).first()
