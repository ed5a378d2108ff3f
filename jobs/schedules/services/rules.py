"""A schedule's rules and defaults, and the job one of its ticks becomes.

The job's fields (queue, task, args, priority, lock_key) follow the queue's own rules
(``jobs.queue.services.job_spec_problems``), checked when the schedule is saved, so its ticks enqueue.
"""

from datetime import UTC, datetime

from jobs.queue import services as job_services
from jobs.schedules.cron import Timing, cron_problem, timezone_problem
from jobs.schedules.models import MissedPolicy, Schedule
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db import sql

DEFAULTS = {
    "args": {},
    "queue": "default",
    "priority": 100,
    "lock_key": None,  # schedule:<name>: one run of a schedule at a time
    "cron": None,
    "interval_sec": None,
    "timezone": "UTC",
    "missed_policy": MissedPolicy.SKIP.value,
    "catch_up_max": 10,
}
FIELDS = ("name", "task", *DEFAULTS)
LIMITS = {"interval_sec": (1, 366 * 24 * 3600), "catch_up_max": (1, 1000)}
_JOB_FIELDS = ("queue", "task", "args", "priority", "lock_key")


def unknown_field_problems(values: dict) -> dict[str, list[str]]:
    return {name: ["Unknown field."] for name in sorted(set(values) - set(FIELDS))}


def schedule_found(queryset, schedule_id: int) -> Schedule:
    """The schedule of ``queryset`` with this id; a 404 otherwise (an id past bigint too)."""
    schedule = queryset.filter(pk=schedule_id).first() if 0 < schedule_id < 2**63 else None
    if schedule is None:
        raise NotFoundError(f"No schedule {schedule_id}.")
    return schedule


def database_now() -> datetime:
    """The database's clock: every process compares ticks with the same one."""
    return sql.rows("SELECT clock_timestamp()")[0][0]


def schedule_problems(values: dict) -> dict[str, list[str]]:
    """Every rule a schedule's ``values`` (all of FIELDS) break, by field; empty when it can be saved."""
    problems: dict[str, list[str]] = {}
    if not isinstance(values["name"], str) or (problem := job_services.text_field_problem("task", values["name"])):
        problems["name"] = [problem if isinstance(values["name"], str) else "Must be a string."]
    spec_problems = job_services.job_spec_problems(schedule_job_spec(values, idempotency_key=None, producer=None))
    problems.update({name: found for name, found in spec_problems.items() if name in _JOB_FIELDS})
    problems.update(_timing_problems(values))
    if values["missed_policy"] not in MissedPolicy.values:
        problems["missed_policy"] = [f"Must be one of {', '.join(MissedPolicy.values)}."]
    for name, (low, high) in LIMITS.items():
        value = values[name]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
            problems[name] = [f"Must be a whole number from {low} to {high}."]
    return problems


def _timing_problems(values: dict) -> dict[str, list[str]]:
    cron, interval = values["cron"], values["interval_sec"]
    if (cron is None) == (interval is None):
        return {"cron": ["Give either cron or interval_sec (exactly one)."]}
    problems = {}
    if cron is not None and (problem := cron_problem(cron)):
        problems["cron"] = [problem]
    if problem := timezone_problem(values["timezone"]):
        problems["timezone"] = [problem]
    return problems


def checked(values: dict) -> dict:
    """``values`` when they make a schedule; a 400 naming each field that breaks a rule otherwise."""
    if problems := schedule_problems(values):
        raise InvalidInputError("The schedule breaks the rules.", details=problems)
    return values


def _reader(values):
    """``read(name)`` of a schedule's field, from a schedule or from its values."""
    return values.get if isinstance(values, dict) else lambda name: getattr(values, name)


def timing_of(values) -> Timing:
    """The timing of a schedule or of its values."""
    get = _reader(values)
    return Timing(cron=get("cron"), interval_sec=get("interval_sec"), timezone=get("timezone"))


def ticks_start_at(schedule: Schedule, *, now: datetime) -> datetime:
    """Where a changed or resumed schedule's ticks start: after now, and after the last tick
    enqueued (so its idempotency key stays unique)."""
    return max(now, schedule.last_tick_at) if schedule.last_tick_at else now


def values_of(schedule: Schedule) -> dict:
    return {name: getattr(schedule, name) for name in FIELDS}


def schedule_job_spec(values, *, idempotency_key: str | None, producer: str | None) -> job_services.JobSpec:
    """The job a tick (or a run now) of a schedule, or of its values, enqueues."""
    get = _reader(values)
    return job_services.JobSpec(
        queue=get("queue"),
        task=get("task"),
        args=get("args"),
        priority=get("priority"),
        lock_key=get("lock_key") or f"schedule:{get('name')}",
        idempotency_key=idempotency_key,
        producer=producer,
    )


def tick_key(schedule_id: int, tick: datetime) -> str:
    """The idempotency key of a schedule's tick: one job per tick, whoever enqueues it."""
    return f"schedule:{schedule_id}:{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"
