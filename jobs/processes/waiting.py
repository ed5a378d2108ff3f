"""Waiting for a client's task to end: on its NOTIFY, holding no connection (blocking, or on the
event loop), reading the task only when the notification cannot say how it ended."""

import json
import time
from contextlib import aclosing, asynccontextmanager, contextmanager

from jobs.processes.models import TASK_DONE_CHANNEL
from jobs.processes.types import PreparedTask, StepTimeoutError, TaskOutcome
from pipeline_project.db import sql
from pipeline_project.db.connections import release_connections, returning_connections
from pipeline_project.web.follow import NOTHING_YET, Read, follow, follow_blocking
from pipeline_project.web.notifications import Listening, blocking_hub
from pipeline_project.web.waiting import WaitingResources, waiting_resources

ENDED = ("finished", "error", "cancelled")
RECHECK_SEC = 5.0  # a waiter re-reads its task this often without a notification

_OUTCOME = """
SELECT t.status, t.response, p.status FROM dl_proc_tasks t JOIN dl_processes p ON p.id = t.process_pk
WHERE t.task_id = %(task_id)s
"""


def task_outcome(task_id: int) -> TaskOutcome | None:
    """None: the task is gone with its process (it removed it)."""
    [row] = sql.rows(_OUTCOME, {"task_id": task_id}) or [None]
    return None if row is None else TaskOutcome(row[0], sql.json_value(row[1]), row[2])


def _notified_outcome(received: dict[str, str], task_id: int) -> TaskOutcome | bool | None:
    """The outcome a task's end notification carried (``[status, response, process status]``,
    when short), or False: read it."""
    data = received.pop(str(task_id), "")
    if not data:
        return False
    status, response, process_status = json.loads(data)
    return TaskOutcome(status, response, process_status)


def _outcome_read(outcome: TaskOutcome | None) -> Read:
    """A read of a task's outcome: done (with it) once the task has ended, or its process is gone."""
    if outcome is None or outcome.status in ENDED:
        return Read([outcome], done=True)
    return NOTHING_YET


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
    was removed. Without ``since`` (see ``task_waiter``) the task is read before waiting.
    The thread's pooled connections go back to the pool while it waits (unless it is inside
    a transaction): the worker that runs the task may need one."""

    @returning_connections
    def read(received: dict[str, str]) -> Read:
        outcome = _notified_outcome(received, task_id)
        return _outcome_read(task_outcome(task_id) if outcome is False else outcome)

    release_connections(abandon_transactions=False)

    deadline = time.monotonic() + timeout
    with blocking_hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)], since=since) as subscription:
        for outcome in follow_blocking(
            subscription, read, deadline=deadline, recheck_sec=RECHECK_SEC, wait_first=since is not None
        ):
            return outcome
    raise StepTimeoutError("timeout")


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
    task_id: int,
    *,
    timeout: float,  # noqa: ASYNC109 - as wait_for_task's: StepTimeoutError at the deadline
    since: Listening | None = None,
    resources: WaitingResources | None = None,
) -> TaskOutcome | None:
    """``wait_for_task`` on the event loop."""
    if resources is None:
        async with waiting_resources() as own:
            return await wait_for_task_async(task_id, timeout=timeout, resources=own)

    async def read(received: dict[str, str]) -> Read:
        outcome = _notified_outcome(received, task_id)
        if outcome is False:
            async with resources.pool.connection() as conn:
                row = await (await conn.execute(_OUTCOME, {"task_id": task_id})).fetchone()
            outcome = None if row is None else TaskOutcome(row[0], row[1], row[2])
        return _outcome_read(outcome)

    deadline = time.monotonic() + timeout
    async with resources.hub.subscribe(TASK_DONE_CHANNEL, [str(task_id)], since=since) as subscription:
        outcomes = follow(subscription, read, deadline=deadline, recheck_sec=RECHECK_SEC, wait_first=since is not None)
        async with aclosing(outcomes):
            async for outcome in outcomes:
                return outcome
    raise StepTimeoutError("timeout")
