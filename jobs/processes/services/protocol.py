"""The worker protocol: claim due tasks (``tasks_claim``: at most one running task per process,
calls before timers) and record how each ended (``task_complete``), in one transaction with
every change it implies: events, the process's new state, the timer it set, the calls it
unblocked, the retry or the error."""

import functools
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.processes import namespaces
from jobs.processes.models import TASK_DONE_CHANNEL, WORK_CHANNEL, Process, Task
from jobs.processes.namespaces import ProcessView
from jobs.processes.selectors import VIEW_COLUMNS, process_history, view_from
from jobs.processes.services._common import (
    cancel_scheduled,
    dumps,
    end_task,
    notify_task_done,
    schedule_task,
    set_status,
)
from jobs.processes.services.parsing import Result
from pipeline_project.db import sql


@dataclass(frozen=True)
class ClaimedTask:
    task_id: int
    process_pk: int
    task_type: str
    args: Any
    context: Any
    attempts_count: int
    last_retry_interval: float
    view: ProcessView  # the process as its processor sees it, read with the claim (its history when asked)


CLAIM_WINDOW = 256


def tasks_claim(*, namespace: str, limit: int, worker: str) -> list[ClaimedTask]:
    """Claim up to ``limit`` due tasks of a namespace, at most one per process, none of a
    process that runs one; a process's calls go before its timers. Each comes with its process
    as its processor sees it; its history (in the task's range, else the namespace's) is read
    when the processor first asks for it.

    Two workers that pick different tasks of one process at once both try to insert its
    ``dl_proc_running`` row; its primary key lets one win, and the other's statement fails
    with a unique violation (``is_running_race``) and simply claims again.
    """
    definition = namespaces.require(namespace)
    rows = sql.rows(
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
            INSERT INTO dl_proc_running (process_pk, task_id, namespace, task_type, running_time, deadline, worker)
            SELECT process_pk, task_id, namespace, task_type, now(), now() + make_interval(secs => %(step_timeout)s),
                   %(worker)s
            FROM unscheduled
            RETURNING task_id
        ),
        claimed AS (
            UPDATE dl_proc_tasks t SET status = 'running', running_time = now()
            FROM started WHERE t.task_id = started.task_id
            RETURNING t.task_id, t.process_pk, t.task_type, t.args, t.context, t.attempts_count,
                      t.last_retry_interval, t.metadata -> 'range' AS range
        )
        SELECT c.task_id, c.process_pk, c.task_type, c.args, c.context, c.attempts_count, c.last_retry_interval,
               {VIEW_COLUMNS}
        FROM claimed c JOIN dl_processes p ON p.id = c.process_pk
        CROSS JOIN LATERAL (SELECT coalesce(c.range, %(default_range)s::jsonb) AS range) AS r
        """,
        {
            "namespace": namespace,
            "window": CLAIM_WINDOW,
            "limit": limit,
            "worker": worker,
            "step_timeout": definition.process_step_timeout,
            "default_range": dumps(definition.history_range or {}),
        },
    )
    return [
        ClaimedTask(
            task_id,
            process_pk,
            task_type,
            sql.json_value(args),
            sql.json_value(context),
            attempts,
            float(interval),
            view=view_from(
                view,
                read_history=functools.partial(
                    process_history, process_pk=process_pk, history_range=sql.json_value(view[-1])
                ),
            ),
        )
        for task_id, process_pk, task_type, args, context, attempts, interval, *view in rows
    ]


def is_running_race(exc: IntegrityError) -> bool:
    return "dl_proc_running_pkey" in str(exc)


def task_complete(*, task: ClaimedTask, namespace: str, outcome: Result | str) -> str:
    """Record how a task ended (a Result, or an error reason); return the completion type:
    ``complete_and_continue`` (a timer set), ``complete_and_suspend`` (timers unset, or the
    process removed), ``complete_and_unlock`` (no action: blocked timers unblocked) or
    ``complete_and_error``."""
    if isinstance(outcome, Result) and outcome.action != "remove":
        tasks_succeed(namespace=namespace, succeeded=[(task, outcome)])
        return completion_type(outcome)
    with transaction.atomic():
        process = Process.objects.select_for_update().filter(id=task.process_pk).first()
        if process is None:
            return "complete_and_suspend"  # removed meanwhile
        if isinstance(outcome, Result):  # the remove action
            process.delete()
            completion = "complete_and_suspend"
        else:
            _failed(process, task, outcome, namespaces.get(namespace))
            completion = "complete_and_error"
        # Workers look now (a call may wait behind this task) and learn when unblocked timers fall due.
        sql.execute(
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
        notify_task_done(task.task_id)


NOTIFIED_OUTCOME_MAX_BYTES = 2000  # the listener remembers its latest notifications: keep them small

# Tasks of one namespace that succeeded, in one statement (the hot path of every call; a worker
# writes the successes that end while its last write runs together: see ``source``): for each,
# its events, the process's new state, the timer change its action asks for (set: the earlier
# timers are cancelled and a new one scheduled; unset: cancelled; none: the timers a call
# blocked are unblocked), the task ended, and the notifications: the caller's (with the outcome,
# when short enough to spare the caller a read), and the workers' (look now if a task of the
# process waits, due, behind this one; and when new or unblocked timers fall due). Each task is
# of another process (a process runs one task at a time); they are locked in id order. The
# tasks' and processes' ids also come as arrays, for their tables' rows to be found by their
# primary keys: the planner takes a batch for 100 rows, and would scan dl_proc_tasks whole.
_SUCCEEDED = """
WITH b AS (
    SELECT * FROM jsonb_to_recordset(%(batch)s::jsonb) AS b(
        task bigint, process bigint, task_type text, events jsonb, keep_aux_state boolean, aux_state jsonb,
        keep_metadata boolean, metadata jsonb, action text, timer_type text, timer_at timestamptz, context jsonb,
        response jsonb)
),
p AS (
    SELECT d.id, d.status, d.last_event_id, d.corrupted_by, (b.task_type = 'repair' OR d.status = 'init') AS to_running,
           b.task, b.events, b.keep_aux_state, b.aux_state, b.keep_metadata, b.metadata, b.action
    FROM dl_processes d JOIN b ON b.process = d.id
    WHERE d.id = ANY (%(processes)s::bigint[])
    ORDER BY d.id FOR UPDATE OF d
),
events AS (
    INSERT INTO dl_proc_events (process_pk, task_id, event_id, timestamp, payload, metadata)
    SELECT p.id, p.task, p.last_event_id + x.n, now(), x.e -> 'payload', x.e -> 'metadata'
    FROM p, jsonb_array_elements(p.events) WITH ORDINALITY AS x(e, n)
),
updated AS (
    UPDATE dl_processes d SET
        aux_state = CASE WHEN p.keep_aux_state THEN d.aux_state ELSE p.aux_state END,
        metadata = CASE WHEN p.keep_metadata THEN d.metadata ELSE p.metadata END,
        last_event_id = d.last_event_id + jsonb_array_length(p.events),
        previous_status = CASE WHEN p.to_running AND d.status <> 'running' THEN d.status ELSE d.previous_status END,
        status_changed_at = CASE WHEN p.to_running AND d.status <> 'running' THEN now() ELSE d.status_changed_at END,
        status = CASE WHEN p.to_running THEN 'running' ELSE d.status END,
        detail = CASE WHEN p.to_running THEN NULL ELSE d.detail END,
        corrupted_by = CASE WHEN p.to_running THEN NULL ELSE d.corrupted_by END
    FROM p WHERE d.id = ANY (%(processes)s::bigint[]) AND d.id = p.id
),
cancelled AS (
    DELETE FROM dl_proc_schedule s USING p
    WHERE p.action IN ('set_timer', 'unset_timer') AND s.process_pk = p.id AND s.task_type IN ('timeout', 'remove')
    RETURNING s.task_id
),
cancelled_tasks AS (
    UPDATE dl_proc_tasks t SET status = 'cancelled', finished_time = now() FROM cancelled c WHERE t.task_id = c.task_id
),
unblocked AS (
    UPDATE dl_proc_schedule s SET status = 'waiting' FROM p
    WHERE p.action = 'none' AND s.process_pk = p.id AND s.status = 'blocked'
    RETURNING s.task_id, s.process_pk, s.scheduled_time
),
unblocked_tasks AS (UPDATE dl_proc_tasks t SET status = 'waiting' FROM unblocked u WHERE t.task_id = u.task_id),
new_timer AS (
    INSERT INTO dl_proc_tasks (process_pk, task_type, status, scheduled_time, context, last_retry_interval,
                               attempts_count)
    SELECT b.process, b.timer_type, 'waiting', b.timer_at, b.context, 0, 0
    FROM b JOIN p ON p.id = b.process WHERE b.action = 'set_timer'
    RETURNING task_id, process_pk, task_type, scheduled_time
),
new_schedule AS (
    INSERT INTO dl_proc_schedule (task_id, process_pk, namespace, task_type, status, scheduled_time)
    SELECT task_id, process_pk, %(namespace)s, task_type, 'waiting', scheduled_time FROM new_timer
),
unrun AS (DELETE FROM dl_proc_running WHERE task_id = ANY (%(tasks)s::bigint[])),
ended AS (
    UPDATE dl_proc_tasks t SET status = 'finished', response = b.response, finished_time = now()
    FROM b WHERE t.task_id = ANY (%(tasks)s::bigint[]) AND t.task_id = b.task
)
SELECT b.task, p.corrupted_by,
       pg_notify(%(done)s, b.task::text || coalesce((
           SELECT E'\n' || o.outcome FROM (
               SELECT jsonb_build_array('finished', b.response,
                                        CASE WHEN p.to_running THEN 'running' ELSE p.status END)::text AS outcome
           ) AS o WHERE p.id IS NOT NULL AND octet_length(o.outcome) <= %(notified_max)s), '')),
       (SELECT pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM now()))
        WHERE EXISTS (SELECT 1 FROM dl_proc_schedule s WHERE s.process_pk = b.process AND s.status = 'waiting'
                      AND s.scheduled_time <= now())),
       (SELECT pg_notify(%(work)s, %(namespace)s || '@' || extract(epoch FROM min(due)))
        FROM (SELECT scheduled_time AS due FROM new_timer WHERE process_pk = b.process
              UNION ALL SELECT scheduled_time FROM unblocked WHERE process_pk = b.process) AS timers
        HAVING count(*) > 0)
FROM b LEFT JOIN p ON p.task = b.task
"""


def completion_type(result: Result) -> str:
    """Progressor's completion type of a success (see ``task_complete``)."""
    if result.action == "set_timer":
        return "complete_and_continue"
    return "complete_and_suspend" if result.action == "unset_timer" else "complete_and_unlock"


def tasks_succeed(*, namespace: str, succeeded: list[tuple[ClaimedTask, Result]]) -> None:
    """Record the successes of tasks of ``namespace`` (none with the remove action), each of
    another process, in one statement; a repair that ends the error a timeout caused runs that
    timeout again."""
    rows = sql.rows(
        _SUCCEEDED,
        {
            "batch": dumps(
                [
                    {
                        "task": task.task_id,
                        "process": task.process_pk,
                        "task_type": task.task_type,
                        "events": result.events,
                        "keep_aux_state": result.keep_aux_state,
                        "aux_state": result.aux_state,
                        "keep_metadata": result.keep_metadata,
                        "metadata": result.metadata,
                        "action": result.action or "none",
                        "timer_type": "remove" if result.timer_removes else "timeout",
                        "timer_at": result.timer_at.isoformat() if result.timer_at else None,
                        "context": task.context,  # the timer carries the task's context on, as in progressor
                        "response": result.response,
                    }
                    for task, result in succeeded
                ]
            ),
            "tasks": [task.task_id for task, _result in succeeded],
            "processes": [task.process_pk for task, _result in succeeded],
            "namespace": namespace,
            "done": TASK_DONE_CHANNEL,
            "notified_max": NOTIFIED_OUTCOME_MAX_BYTES,
            "work": WORK_CHANNEL,
        },
    )
    corrupting = {task_id: corrupted_by for task_id, corrupted_by, *_notified in rows}
    for task, result in succeeded:
        if task.task_type == "repair" and corrupting.get(task.task_id) and result.action != "set_timer":
            _timeout_rerun(task, corrupting[task.task_id])


def _timeout_rerun(task: ClaimedTask, corrupting: int) -> None:
    """A repaired timeout runs again, with its args and context."""
    with transaction.atomic():
        timeout = Task.objects.filter(task_id=corrupting, task_type="timeout").first()
        process = Process.objects.filter(id=task.process_pk).first()
        if timeout is not None and process is not None:
            schedule_task(process, "timeout", args=timeout.args, context=timeout.context, at=timezone.now())


def _failed(process: Process, task: ClaimedTask, reason: str, definition: namespaces.Namespace | None) -> None:
    if task.task_type == "repair":  # the process stays as it was
        end_task(task.task_id, status="error", response={"error": reason})
        return
    if task.task_type == "timeout" and definition is not None:
        attempts = task.attempts_count + 1
        delay = definition.retry_policy.next_delay(
            attempts=attempts, last_delay=task.last_retry_interval, reason=reason
        )
        if delay is not None:
            sql.execute(
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
    set_status(process, "error")
    process.detail = reason
    process.corrupted_by = task.task_id
    process.save()
    cancel_scheduled(process)
    end_task(task.task_id, status="error", response={"error": reason}, attempts=task.attempts_count + 1)
