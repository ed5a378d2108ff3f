"""What a job's admin page shows: its header (times as durations), the operator's buttons its
status and the user's permissions allow, its data as folded JSON, each attempt's error with its
traceback, and its events as a timeline, newest attempt first."""

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone

from jobs.models import Job, JobStatus
from jobs.services.operators import RETRYABLE

FOLD_LINES = 12  # a JSON value longer than this starts folded
TIMELINE_EVENTS = 500  # the newest; a job retried forever does not make a page of megabytes


@dataclass(frozen=True)
class Shown:
    """A JSON value as the page shows it: pretty-printed, folded when long."""

    text: str
    lines: int

    @property
    def folded(self) -> bool:
        return self.lines > FOLD_LINES

    @property
    def first_line(self) -> str:
        return self.text.split("\n", 1)[0]


def shown(value) -> Shown | None:
    if value in (None, {}, []):
        return None
    text = json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)
    return Shown(text=text, lines=text.count("\n") + 1)


def _compact(value: dict) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str) if value else ""


def elapsed(start: datetime | None, end: datetime | None) -> timedelta | None:
    return end - start if start and end else None


def job_page(job: Job, *, can_repair: bool, can_remove: bool) -> dict:
    """The page's context; ``can_repair`` (retry, cancel) and ``can_remove`` are the user's
    permissions as the admin decides them for the actions."""
    now = timezone.now()
    events = list(job.events.order_by("-event_id")[:TIMELINE_EVENTS])[::-1]
    is_going = not job.is_finished
    return {
        "job": job,
        "live": is_going,
        "waited": elapsed(job.created_at, job.started_at or (now if job.status == JobStatus.QUEUED else None)),
        "ran": elapsed(job.started_at, job.finished_at or (now if job.status == JobStatus.RUNNING else None)),
        "can_retry": job.status in RETRYABLE and can_repair,
        "can_cancel": is_going and can_repair,
        "can_delete": job.status != JobStatus.RUNNING and can_remove,
        "data": [("args", shown(job.args)), ("progress", shown(job.progress)), ("result", shown(_result(events)))],
        "errors": _errors(events),
        "attempts": _timeline(events),
    }


def _result(events) -> object:
    done = [event for event in events if event.kind == "done"]
    return _payload(done[-1]).get("result") if done else None


def _payload(event) -> dict:
    return event.payload if isinstance(event.payload, dict) else {}


def _errors(events) -> list[dict]:
    """Each failed attempt's error and traceback, newest first."""
    return [
        {
            "attempt": _payload(event).get("attempt"),
            "ts": event.ts,
            "kind": event.kind,
            "error": _payload(event)["error"],
            "traceback": _payload(event).get("traceback", ""),
        }
        for event in reversed(events)
        if _payload(event).get("error")
    ]


def _timeline(events) -> list[dict]:
    """Events by attempt (newest attempt first), each with the time since the one before."""
    attempts: dict[int, list] = {}
    previous = None
    attempt = 1  # an event without an attempt (queued, requeue) belongs with the one before it
    for event in events:
        payload = _payload(event)
        if isinstance(payload.get("attempt"), int):
            attempt = payload["attempt"]
        attempts.setdefault(attempt, []).append(
            {
                "event": event,
                "since_previous": event.ts - previous.ts if previous else None,
                "worker": payload.get("worker", ""),
                "details": _compact({k: v for k, v in payload.items() if k not in ("worker", "attempt", "traceback")}),
            }
        )
        previous = event
    return [{"attempt": number, "events": attempts[number]} for number in sorted(attempts, reverse=True)]
