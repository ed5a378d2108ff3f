"""Enqueuing the ticks that are due, exactly once whatever runs it, and the schedules declared in code.

A tick is *late* until it is ``DL_SCHEDULES_GRACE_SEC`` old and *missed* after: late ticks are
always enqueued (a worker was slow, restarting or failing over); missed ones (no worker ran for
a while) follow the schedule's policy: ``skip`` none, ``once`` the latest, ``catch_up`` the
latest ``catch_up_max``, oldest first. The next run is then the first tick after now.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import islice, takewhile

from django.conf import settings
from django.db import transaction

from jobs.queue import services as job_services
from jobs.schedules.cron import Timing
from jobs.schedules.models import MissedPolicy, Schedule
from jobs.schedules.services.rules import (
    DEFAULTS,
    checked,
    database_now,
    schedule_job_spec,
    tick_key,
    ticks_start_at,
    timing_of,
    unknown_field_problems,
    values_of,
)
from pipeline_project.api.errors import ApplicationError, InvalidInputError
from pipeline_project.db import sql

log = logging.getLogger("jobs.schedules")

BATCH = 100  # schedules locked and enqueued per statement round
COUNT_AT_MOST = 100_000  # missed ticks counted (a minutely cron's 69 days), so a long outage costs little


@dataclass(frozen=True)
class Due:
    ticks: list[datetime]  # to enqueue, oldest first
    skipped: int  # missed ticks the policy leaves out (counted up to COUNT_AT_MOST)
    next_run_at: datetime


def due_ticks(
    timing: Timing, *, next_run_at: datetime, now: datetime, grace_sec: float, policy: str, catch_up_max: int
) -> Due:
    """Which ticks from ``next_run_at`` up to ``now`` to enqueue, under ``policy``."""
    cutoff = now - timedelta(seconds=grace_sec)  # ticks before it are missed
    keep = {MissedPolicy.SKIP: 0, MissedPolicy.ONCE: 1, MissedPolicy.CATCH_UP: catch_up_max}[policy]
    missed = timing.count(next_run_at, cutoff, at_most=COUNT_AT_MOST)
    kept = list(takewhile(lambda tick: tick >= next_run_at, islice(timing.before(cutoff), min(keep, missed))))
    late = list(timing.between(max(next_run_at, cutoff), now))
    return Due(ticks=[*reversed(kept), *late], skipped=missed - len(kept), next_run_at=next(timing.after(now)))


def schedules_enqueue_due(*, now: datetime | None = None) -> dict:
    """Enqueue every due tick of every schedule that is not paused, in one transaction.

    Each schedule's row is locked (``SKIP LOCKED``: one being enqueued or edited elsewhere waits
    for the next check); its jobs, their journal rows and its next run are written together, so a
    process killed midway leaves all of them or none. The tick's idempotency key makes a second
    enqueue of it return the first job. A schedule whose jobs the queue refuses is logged and left
    due; the others go on.
    """
    now = now or database_now()
    totals = {"enqueued": 0, "skipped": 0, "failed": 0}
    failed: list[int] = []
    with transaction.atomic():
        while True:
            due = list(
                Schedule.objects.select_for_update(skip_locked=True)
                .filter(paused=False, next_run_at__lte=now)
                .exclude(pk__in=failed)
                .order_by("next_run_at")[:BATCH]
            )
            for schedule in due:
                try:
                    with transaction.atomic():
                        enqueued, skipped = _enqueue_ticks(schedule, now=now)
                except ApplicationError as exc:
                    log.warning("schedule not enqueued", extra={"schedule": schedule.name, "error": exc.message})
                    failed.append(schedule.pk)
                    continue
                totals["enqueued"] += enqueued
                totals["skipped"] += skipped
            if len(due) < BATCH:
                break
    totals["failed"] = len(failed)
    return totals


def _enqueue_ticks(schedule: Schedule, *, now: datetime) -> tuple[int, int]:
    due = due_ticks(
        timing_of(schedule),
        next_run_at=schedule.next_run_at,
        now=now,
        grace_sec=settings.DL_SCHEDULES_GRACE_SEC,
        policy=schedule.missed_policy,
        catch_up_max=schedule.catch_up_max,
    )
    changes = {"next_run_at": due.next_run_at}
    enqueued = []
    if due.ticks:
        producer = f"schedule:{schedule.name}"
        specs = [
            schedule_job_spec(schedule, idempotency_key=tick_key(schedule.pk, tick), producer=producer)
            for tick in due.ticks
        ]
        enqueued = job_services.job_enqueue_many(specs=specs)
        changes.update(last_tick_at=due.ticks[-1], last_job_id=enqueued[-1].job_id)
    if due.skipped:
        changes.update(last_skipped=due.skipped, last_skipped_at=now)
        log.warning("missed schedule ticks skipped", extra={"schedule": schedule.name, "skipped": due.skipped})
    Schedule.objects.filter(pk=schedule.pk).update(**changes)
    return sum(item.created for item in enqueued), due.skipped


def schedules_declare(*, declared: list[dict]) -> int:
    """Create or update the schedules declared in code (``@task(..., schedule=...)``), by name.

    What an operator changed stays: paused stays paused, and the next run moves only when the
    timing changed. Every declaration is checked before anything is written. Returns how many
    schedules were created or changed.
    """
    if not declared:
        return 0
    full = [{**DEFAULTS, **values} for values in declared]
    problems = {str(values.get("name")): found for values in full if (found := _problems(values))}
    if problems:
        raise InvalidInputError("Schedules declared in code break the rules.", details={"schedules": problems})
    changed = 0
    with transaction.atomic():
        # Workers starting together: one declares, the others then find its rows.
        sql.execute("SELECT pg_advisory_xact_lock(hashtext('dl_schedules.declare'))")
        existing = Schedule.objects.select_for_update().in_bulk([values["name"] for values in full], field_name="name")
        now = database_now()
        for values in full:
            schedule = existing.get(values["name"]) or Schedule(
                created_by="code", paused=False, next_run_at=next(timing_of(values).after(now))
            )
            if schedule.pk and values_of(schedule) == values and schedule.declared_in_code:
                continue
            if schedule.pk and timing_of(values) != timing_of(schedule):
                schedule.next_run_at = next(timing_of(values).after(ticks_start_at(schedule, now=now)))
            for name, value in values.items():
                setattr(schedule, name, value)
            schedule.declared_in_code, schedule.changed_by = True, "code"
            schedule.save()
            changed += 1
    return changed


def _problems(values: dict) -> dict:
    if unknown := unknown_field_problems(values):
        return unknown
    try:
        checked(values)
    except InvalidInputError as exc:
        return exc.details
    return {}
