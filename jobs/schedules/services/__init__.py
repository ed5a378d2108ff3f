"""State changes of schedules: operators' (``operators``) and the enqueue of due ticks and the
schedules declared in code (``ticking``). Callers import the names from here."""

from jobs.schedules.services.operators import (
    schedule_create,
    schedule_delete,
    schedule_pause,
    schedule_resume,
    schedule_run_now,
    schedule_update,
)
from jobs.schedules.services.rules import DEFAULTS, FIELDS, LIMITS, schedule_problems, timing_of
from jobs.schedules.services.ticking import Due, due_ticks, schedules_declare, schedules_enqueue_due

__all__ = [
    "DEFAULTS",
    "FIELDS",
    "LIMITS",
    "Due",
    "due_ticks",
    "schedule_create",
    "schedule_delete",
    "schedule_pause",
    "schedule_problems",
    "schedule_resume",
    "schedule_run_now",
    "schedule_update",
    "schedules_declare",
    "schedules_enqueue_due",
    "timing_of",
]
