"""History ranges (progressor's ``history_range``): which of a process's events are read.

``{"offset": n, "limit": n, "direction": "forward" | "backward"}``, every key optional.
Forward: the events after event id ``offset``, oldest first; backward: those before it (0 or
absent: from the last), newest first; at most ``limit`` of them (absent: all).

A processor gets its task's range: the one its init, call or repair was given, else its
namespace's ``history_range`` (else the whole history). Readers (GET) pass their own.
"""

from typing import Any

from jobs.processes.models import MAX_EVENT_ID
from pipeline_project.api.errors import InvalidInputError

DIRECTIONS = ("forward", "backward")
# An offset is an event id, and no process has more events than there are ids.
INTEGER_LIMITS = {"offset": (0, MAX_EVENT_ID), "limit": (0, MAX_EVENT_ID)}
FIELDS = (*INTEGER_LIMITS, "direction")


def history_range_problem(value: Any) -> str | None:
    """Why ``value`` is not a history range, or None."""
    if not isinstance(value, dict):
        return "range must be an object with offset, limit and direction"
    if unknown := sorted(map(repr, set(value) - set(FIELDS))):
        return f"unknown range fields: {', '.join(unknown)}"
    for name, (low, high) in INTEGER_LIMITS.items():
        if name in value:
            number = value[name]
            if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
                return f"range {name} must be an integer from {low} to {high}"
    if "direction" in value and value["direction"] not in DIRECTIONS:
        return f"range direction must be {' or '.join(DIRECTIONS)}"
    return None


def history_range_clean(value: Any) -> dict | None:
    """``value`` checked (400 naming what is wrong) and copied; None stays None: no range given."""
    if value is None:
        return None
    if problem := history_range_problem(value):
        raise InvalidInputError(problem, details={"range": [problem]})
    return dict(value)
