"""What a process's admin page shows: its facts in a few dense rows, the repairs an operator may
press (each asking first, saying what it changes), what it runs now and what waits in its
schedule (timers to the millisecond, counting down), and its tasks and events newest first, a
page at a time: a process with 10,000 events is one index range of a page of them, not 10,000
rows."""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.http import QueryDict
from django.utils import timezone

from jobs.processes import selectors
from jobs.processes.models import TIMER_TYPES, Event, Process, Task
from pipeline_project.web.arguments import arguments_masked, may_view_arguments
from pipeline_project.web.query import query_int
from pipeline_project.web.times import absolute

TASKS_SHOWN = 20
EVENTS_SHOWN = 25
LONG_JSON = 160  # characters: a longer value starts folded
TASKS_TO, EVENTS_TO = "tasks_to", "events_to"  # the query's page of each list: its newest id shown

# The palette's colours (jobs/queue/console/templatetags/status_palette.py) of a process's and a task's statuses.
BADGES = {
    "init": "queued",
    "running": "running",
    "error": "failed",
    "waiting": "queued",
    "blocked": "attention",
    "finished": "succeeded",
    "cancelled": "canceled",
}


@dataclass(frozen=True)
class Shown:
    """A JSON value as the page shows it: on one line, folded (its whole pretty-printed) when long."""

    line: str
    pretty: str

    @property
    def folded(self) -> bool:
        return len(self.line) > LONG_JSON


def shown(value) -> Shown | None:
    if value is None:
        return None
    return Shown(
        line=json.dumps(value, ensure_ascii=False, sort_keys=True, default=str),
        pretty=json.dumps(value, ensure_ascii=False, sort_keys=True, indent=2, default=str),
    )


@dataclass(frozen=True)
class Precise:
    """A moment to the millisecond ("09:15:03.250"), its date and time zone in ``title``: the times
    of timers that fire every few seconds."""

    moment: datetime

    @property
    def iso(self) -> str:
        return self.moment.isoformat()

    @property
    def text(self) -> str:
        return timezone.localtime(self.moment).strftime("%H:%M:%S.%f")[:12]

    @property
    def title(self) -> str:
        return absolute(self.moment)


def precise(moment: datetime | None) -> Precise | None:
    return None if moment is None else Precise(moment)


def _between(start: datetime | None, end: datetime | None) -> timedelta | None:
    return end - start if start and end else None


def _task_row(task: Task, *, masked: bool, now: datetime) -> dict[str, Any]:
    return {
        "task": task,
        "badge": BADGES.get(task.status, "other"),
        "scheduled": precise(task.scheduled_time),
        "waited": _between(task.scheduled_time, task.running_time),
        "ran": _between(task.running_time, task.finished_time or (now if task.status == "running" else None)),
        "args": shown(arguments_masked(task.args) if masked else task.args),
        "response": shown(task.response),
    }


def _event_row(event: Event, *, query: QueryDict) -> dict[str, Any]:
    return {
        "event": event,
        "task_url": task_url(query, event.task_id),
        "payload": shown(event.payload),
        "metadata": shown(event.metadata),
    }


def repairs(process: Process) -> list[dict[str, str]]:
    """The repairs of a process in error, each with the question it asks before it is made."""
    corrupting = selectors.task_type_of(task_id=process.corrupted_by)
    timer = (
        f" The {corrupting} task that put it in error (task {process.corrupted_by}) is scheduled to run again now."
        if corrupting in TIMER_TYPES
        else ""
    )
    return [
        {
            "action": "repair",
            "label": "Repair",
            "confirm": f"Repair process {process}? Its processor runs a repair task on this 1 process now; if the "
            "repair succeeds the process goes from error back to running, if it fails the process stays in error.",
        },
        {
            "action": "simple_repair",
            "label": "Simple repair",
            "confirm": f"Set process {process} back to running without its processor? This 1 process leaves error "
            f"and its error detail is cleared.{timer}",
        },
    ]


def _page_url(query: QueryDict, name: str, value: int | None) -> str:
    """The page's own query with one list's page set (None: its newest), never the fragment's flag."""
    changed = query.copy()
    changed.pop("fragment", None)
    changed.pop(name, None)
    if value is not None:
        changed[name] = str(value)
    return f"?{changed.urlencode()}"


def task_url(query: QueryDict, task_id: int | None) -> str | None:
    """Where the page shows the task ``task_id``: the page of tasks it heads, at its row."""
    return None if task_id is None else f"{_page_url(query, TASKS_TO, task_id)}#task-{task_id}"


def process_page(process: Process, *, request, can_repair: bool) -> dict[str, Any]:
    """The page's context (read in the caller's snapshot); ``can_repair``: the user's permission.
    Arguments show masked unless the request's user may view them."""
    query = request.GET
    tasks_to, events_to = query_int(query.get(TASKS_TO)), query_int(query.get(EVENTS_TO))
    tasks, older_tasks = selectors.process_tasks_page(process_pk=process.id, up_to=tasks_to, limit=TASKS_SHOWN)
    events, older_events = selectors.process_events_page(process_pk=process.id, up_to=events_to, limit=EVENTS_SHOWN)
    pending = selectors.process_pending(process_pk=process.id)
    masked, now = not may_view_arguments(request), timezone.now()
    return {
        "process": process,
        "badge": BADGES.get(process.status, "other"),
        "live": process.status == "init" or pending["running"] is not None or bool(pending["scheduled"]),
        "running": pending["running"],
        "running_deadline": precise(pending["running"].deadline) if pending["running"] else None,
        "running_task_url": task_url(query, pending["running"].task_id) if pending["running"] else None,
        "scheduled": [
            {
                "entry": entry,
                "at": precise(entry.scheduled_time),
                "timer": entry.task_type in TIMER_TYPES,
                "task_url": task_url(query, entry.task_id),
            }
            for entry in pending["scheduled"]
        ],
        "corrupting_task_url": task_url(query, process.corrupted_by),
        "aux_state": shown(process.aux_state),
        "metadata": shown(process.metadata),
        "repairs": repairs(process) if process.status == "error" and can_repair else [],
        "tasks": [_task_row(task, masked=masked, now=now) for task in tasks],
        "tasks_pages": {
            "older": _page_url(query, TASKS_TO, older_tasks) if older_tasks else None,
            "newest": _page_url(query, TASKS_TO, None) if tasks_to is not None else None,
        },
        "events": [_event_row(event, query=query) for event in events],
        "events_pages": {
            "older": _page_url(query, EVENTS_TO, older_events) if older_events else None,
            "newest": _page_url(query, EVENTS_TO, None) if events_to is not None else None,
            "param": EVENTS_TO,
            "kept": [(name, value) for name, value in query.items() if name not in (EVENTS_TO, "fragment")],
        },
    }
