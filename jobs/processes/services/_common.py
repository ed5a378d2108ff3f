"""What the processes' services share: a locked process, status changes, scheduling and ending tasks."""

import json
from datetime import datetime
from typing import Any

from django.utils import timezone

from jobs.processes.models import CALL_TYPES, TASK_DONE_CHANNEL, TIMER_TYPES, WORK_CHANNEL, Process
from pipeline_project.api.errors import NotFoundError
from pipeline_project.db import sql


def locked_process(namespace: str, process_id: str) -> Process:
    process = Process.objects.select_for_update().filter(namespace=namespace, process_id=process_id).first()
    if process is None:
        raise NotFoundError("process not found", code="process_not_found")
    return process


def set_status(process: Process, status: str) -> None:
    if process.status != status:
        process.previous_status = process.status
        process.status = status
        process.status_changed_at = timezone.now()


def schedule_task(
    process: Process, task_type: str, *, at: datetime, args=None, metadata=None, context=None, idempotency_key=None
) -> int:
    """A new task, waiting in the schedule from ``at``; workers of the namespace are told."""
    return sql.rows(
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
            "args": dumps(args),
            "metadata": dumps(metadata),
            "context": dumps(context),
            "key": idempotency_key,
            "namespace": process.namespace,
            "channel": WORK_CHANNEL,
        },
    )[0][0]


def cancel_scheduled(process: Process, types: tuple[str, ...] = (*CALL_TYPES, *TIMER_TYPES)) -> None:
    rows = sql.rows(
        """
        WITH gone AS (
            DELETE FROM dl_proc_schedule WHERE process_pk = %(process)s AND task_type = ANY (%(types)s)
            RETURNING task_id
        )
        UPDATE dl_proc_tasks t SET status = 'cancelled', finished_time = now() FROM gone
        WHERE t.task_id = gone.task_id RETURNING t.task_id
        """,
        {"process": process.id, "types": list(types)},
    )
    for (task_id,) in rows:  # their callers stop waiting
        notify_task_done(task_id)


def notify_task_done(task_id: int) -> None:
    """Whoever waits for the task reads how it ended (on commit)."""
    sql.execute("SELECT pg_notify(%(channel)s, %(task)s)", {"channel": TASK_DONE_CHANNEL, "task": str(task_id)})


def end_task(task_id: int, *, status: str, response: Any, attempts: int | None = None) -> None:
    sql.execute(
        """
        WITH unrun AS (DELETE FROM dl_proc_running WHERE task_id = %(task)s)
        UPDATE dl_proc_tasks SET status = %(status)s, response = %(response)s, finished_time = now(),
            attempts_count = coalesce(%(attempts)s, attempts_count)
        WHERE task_id = %(task)s
        """,
        {"task": task_id, "status": status, "response": dumps(response), "attempts": attempts},
    )


def dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value)
