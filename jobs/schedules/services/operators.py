"""What operators do to schedules (the API and the admin): create, change, pause, resume,
delete, run now. Each is one transaction holding the schedule's row, so an enqueue of its ticks
(which skips locked rows) sees the schedule before or after, never half of each."""

import uuid

from django.db import IntegrityError, transaction

from jobs.queue import services as job_services
from jobs.schedules.models import Schedule
from jobs.schedules.services.rules import (
    DEFAULTS,
    checked,
    database_now,
    schedule_found,
    schedule_job_spec,
    ticks_start_at,
    timing_of,
    unknown_field_problems,
    values_of,
)
from pipeline_project.api.errors import ConflictError, InvalidInputError


def schedule_create(*, values: dict, by: str, declared_in_code: bool = False) -> Schedule:
    """A new schedule from ``values`` (name and task at least; DEFAULTS fill the rest); its first
    run is its first tick after now."""
    if unknown := unknown_field_problems(values):
        raise InvalidInputError("Unknown schedule fields.", details=unknown)
    missing = [name for name in ("name", "task") if name not in values]
    if missing:
        raise InvalidInputError("The schedule breaks the rules.", details={name: ["Required."] for name in missing})
    values = checked({**DEFAULTS, **values})
    try:
        with transaction.atomic():
            return Schedule.objects.create(
                **values,
                next_run_at=next(timing_of(values).after(database_now())),
                declared_in_code=declared_in_code,
                created_by=by,
                changed_by=by,
            )
    except IntegrityError:  # the name's unique index: another create won
        raise _name_taken(values["name"]) from None


def schedule_update(*, schedule_id: int, changes: dict, by: str) -> Schedule:
    """Change some of a schedule's fields. Setting cron clears interval_sec and the other way round;
    a change of timing moves the next run to the first new tick after now (and after the last tick)."""
    if not changes:
        raise InvalidInputError("Nothing to change.", details={"non_field_errors": ["Give at least one field."]})
    for one, other in (("cron", "interval_sec"), ("interval_sec", "cron")):
        if changes.get(one) is not None and other not in changes:
            changes = {**changes, other: None}
    try:
        with transaction.atomic():
            schedule = _locked(schedule_id)
            if schedule.declared_in_code:
                raise ConflictError(
                    f"Schedule {schedule.name!r} is declared in code: change it there (pause, resume and run it here).",
                    code="declared_in_code",
                )
            return _apply(schedule, checked({**values_of(schedule), **changes}), by=by)
    except IntegrityError:
        raise _name_taken(changes["name"]) from None


def _apply(schedule: Schedule, values: dict, *, by: str) -> Schedule:
    """Save ``values`` (checked) on the locked ``schedule``."""
    if timing_of(values) != timing_of(schedule):
        schedule.next_run_at = next(timing_of(values).after(ticks_start_at(schedule, now=database_now())))
    for name, value in values.items():
        setattr(schedule, name, value)
    schedule.changed_by = by
    schedule.save()
    return schedule


def schedule_pause(*, schedule_id: int, by: str) -> tuple[Schedule, bool]:
    """Stop enqueuing its ticks; True if it was running."""
    with transaction.atomic():
        schedule = _locked(schedule_id)
        if schedule.paused:
            return schedule, False
        schedule.paused, schedule.changed_by = True, by
        schedule.save(update_fields=["paused", "changed_by", "changed_at"])
        return schedule, True


def schedule_resume(*, schedule_id: int, by: str) -> tuple[Schedule, bool]:
    """Enqueue its ticks again from the first one after now (ticks that fell while it was paused
    are not run); True if it was paused."""
    with transaction.atomic():
        schedule = _locked(schedule_id)
        if not schedule.paused:
            return schedule, False
        schedule.paused, schedule.changed_by = False, by
        schedule.next_run_at = next(timing_of(schedule).after(ticks_start_at(schedule, now=database_now())))
        schedule.save(update_fields=["paused", "next_run_at", "changed_by", "changed_at"])
        return schedule, True


def schedule_delete(*, schedule_id: int) -> Schedule:
    """Delete a schedule (its jobs stay). One declared in code comes back when a worker starts."""
    with transaction.atomic():
        schedule = _locked(schedule_id)
        schedule.delete()
        return schedule


def schedule_run_now(*, schedule_id: int, by: str) -> job_services.Enqueued:
    """Enqueue one job of the schedule now, beside its ticks (a paused schedule too)."""
    with transaction.atomic():
        schedule = _locked(schedule_id)
        enqueued = job_services.job_enqueue(
            spec=schedule_job_spec(
                schedule, idempotency_key=f"schedule:{schedule.id}:manual:{uuid.uuid4()}", producer=by
            )
        )
        Schedule.objects.filter(pk=schedule.pk).update(last_job_id=enqueued.job_id)
        return enqueued


def _locked(schedule_id: int) -> Schedule:
    return schedule_found(Schedule.objects.select_for_update(), schedule_id)


def _name_taken(name: str) -> ConflictError:
    return ConflictError(f"A schedule named {name!r} exists.", code="name_taken", details={"name": [name]})
