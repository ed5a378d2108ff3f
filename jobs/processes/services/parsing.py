"""What the processes' services take from outside, held to their rules: a processor's answer
(``result_parse``), an imported process (``process_import_parse``), and the times both carry."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from jobs.processes.inputs import check_json
from pipeline_project.api.errors import InvalidInputError
from pipeline_project.db.storable import json_problem


def timer_time(value: Any) -> datetime | None:
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


def event_time(value: Any) -> datetime | None:
    """An imported event's time: Unix seconds (as progressor exports them) or ISO 8601."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    return timer_time(value) if isinstance(value, str) else None


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
        timer_at = timer_time(action["set_timer"])
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


@dataclass(frozen=True)
class ProcessImport:
    """A process as it was elsewhere, ready to be recorded (see ``process_put``)."""

    status: str
    detail: str | None
    aux_state: Any
    metadata: Any
    history: list[dict]  # events with their ids; timestamps as ISO 8601 text
    removed: bool  # the action "remove": recorded, then removed at once
    timer_at: datetime | None
    timer_removes: bool


def process_import_parse(process: dict, action: Any, *, process_id: str) -> ProcessImport:
    """A put's process and action, in the shape the API's ``PutSerializer`` checks, held to an
    import's rules (400 naming the one broken): the process is the one the request names, its
    events' ids are distinct, its times are times, and all of it can be stored."""
    if process.get("process_id", process_id) != process_id:
        raise InvalidInputError("process.process_id differs from the process id in the request")
    history = process.get("history") or []
    ids = [event["event_id"] for event in history]
    if len(set(ids)) != len(ids):
        raise InvalidInputError("each history event needs a distinct event_id")
    if any("timestamp" in event and event_time(event["timestamp"]) is None for event in history):
        raise InvalidInputError("event timestamps are Unix seconds or ISO 8601 with a time zone")
    check_json("process", process)
    timer_at = None
    if isinstance(action, dict):  # {"set_timer": ..., "remove": bool}
        timer_at = timer_time(action["set_timer"])
        if timer_at is None:
            raise InvalidInputError("set_timer is seconds from now or an ISO 8601 time with a time zone")
    return ProcessImport(
        status=process.get("status", "running"),
        detail=process.get("detail"),
        aux_state=process.get("aux_state"),
        metadata=process.get("metadata"),
        history=[
            {**event, "timestamp": event_time(event["timestamp"]).isoformat()} if "timestamp" in event else event
            for event in history
        ],
        removed=action == "remove",
        timer_at=timer_at,
        timer_removes=isinstance(action, dict) and action.get("remove", False),
    )
