"""Schedules' periodic task (``jobs.runtime.registry``): enqueue the ticks that are due, every
DL_SCHEDULES_CHECK_SEC, once across all processes; and, when a worker starts, the schedules its
task handlers declare (``@task(..., schedule=...)``)."""

from django.conf import settings

from jobs.runtime.periodic import PeriodicWork
from jobs.runtime.registry import on_start, periodic_tasks
from jobs.schedules import services


@periodic_tasks
def schedule_tasks(config) -> list[PeriodicWork]:
    return [PeriodicWork("schedules.enqueue", settings.DL_SCHEDULES_CHECK_SEC, enqueue_due)]


def enqueue_due() -> dict:
    return services.schedules_enqueue_due()


@on_start
def declare_schedules(handlers) -> None:
    services.schedules_declare(declared=handlers.schedules())
