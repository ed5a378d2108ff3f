"""Reads of schedules: the list, one schedule, and when it runs next."""

from datetime import datetime

from django.db.models import QuerySet

from jobs.schedules.models import Schedule
from jobs.schedules.services import timing_of
from jobs.schedules.services.rules import schedule_found

NEXT_RUNS = 5


def schedule_list() -> QuerySet[Schedule]:
    return Schedule.objects.order_by("name")


def schedule_get(*, schedule_id: int) -> Schedule:
    return schedule_found(Schedule.objects.all(), schedule_id)


def next_run_times(schedule: Schedule, count: int = NEXT_RUNS) -> list[datetime]:
    """Its next ``count`` runs (the first may be overdue while no worker runs); none while paused."""
    if schedule.paused:
        return []
    return [schedule.next_run_at, *timing_of(schedule).next_times(schedule.next_run_at, count - 1)]


def schedule_by_name(*, name: str) -> Schedule | None:
    """The schedule named ``name``, or None."""
    return Schedule.objects.filter(name=name).first()
