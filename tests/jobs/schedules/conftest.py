from datetime import UTC, datetime

from jobs.schedules import services
from jobs.schedules.models import Schedule


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def make(name="reports.hourly", *, due_at: datetime | None = None, **values) -> Schedule:
    """A schedule (every minute unless told), its next run moved to ``due_at`` if given."""
    values = {"task": "test.echo", **values}
    if "cron" not in values:
        values.setdefault("interval_sec", 60)
    schedule = services.schedule_create(values={"name": name, **values}, by="tester")
    if due_at is not None:
        Schedule.objects.filter(pk=schedule.pk).update(next_run_at=due_at)
        schedule.refresh_from_db()
    return schedule
