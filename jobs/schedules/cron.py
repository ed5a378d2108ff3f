"""When a schedule's ticks fall: a five-field cron expression read in a time zone (parsed and
iterated by cronsim, which handles daylight saving time as Debian's cron does), or a fixed
interval of whole seconds whose ticks are its multiples since the Unix epoch (every 60 s on the
minute, every 3600 s on the hour, UTC), so every process computes the same ticks.

Times in and out are aware datetimes; ticks come out in UTC.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from pipeline_project.db.storable import text_problem

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)
CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")


def cron_problem(expression: str) -> str | None:
    """Why ``expression`` is not a five-field cron expression that ever fires, or None."""
    if problem := text_problem(expression):
        return f"Must not be stored: it {problem}."
    if len(expression.split()) != len(CRON_FIELDS):
        return f"Use five fields: {' '.join(CRON_FIELDS)} (got {len(expression.split())})."
    try:
        next(CronSim(expression, datetime.now(UTC)))
    except CronSimError as exc:
        return f"{exc} field in {expression!r}."  # cronsim names it: "Bad day-of-week"
    except StopIteration:
        return f"{expression!r} never fires."
    return None


def timezone_problem(name: str) -> str | None:
    """Why ``name`` is not an IANA time zone this host knows, or None."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"{name!r} is not an IANA time zone name (e.g. UTC, Europe/Prague, America/New_York)."
    return None


@dataclass(frozen=True)
class Timing:
    """A valid cron expression in a time zone, or an interval (exactly one)."""

    cron: str | None = None
    interval_sec: int | None = None
    timezone: str = "UTC"

    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    def after(self, moment: datetime) -> Iterator[datetime]:
        """Ticks strictly after ``moment``, ascending."""
        if self.interval_sec is not None:
            number = self._interval_number(moment) + 1
            while True:
                yield self._interval_tick(number)
                number += 1
        zone = self.zone()
        last = moment
        for local_tick in CronSim(self.cron, moment.astimezone(zone)):
            tick = local_tick.astimezone(UTC)
            # After a clock goes back, a fixed-time job cron ran in the first pass is not run again.
            if tick > last:
                last = tick
                yield tick

    def before(self, moment: datetime) -> Iterator[datetime]:
        """Ticks strictly before ``moment``, descending."""
        if self.interval_sec is not None:
            number = self._interval_number(moment - MICROSECOND)
            while True:
                yield self._interval_tick(number)
                number -= 1
        zone = self.zone()
        last = moment
        for local_tick in CronSim(self.cron, (moment - MICROSECOND).astimezone(zone), reverse=True):
            tick = local_tick.astimezone(UTC)
            if tick < last:
                last = tick
                yield tick

    def between(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Ticks from ``start`` to ``end``, both included, ascending."""
        for tick in self.after(start - MICROSECOND):
            if tick > end:
                return
            yield tick

    def count(self, start: datetime, end: datetime, *, at_most: int) -> int:
        """How many ticks fall from ``start`` up to (not including) ``end``; at most ``at_most``."""
        if end <= start:
            return 0
        if self.interval_sec is not None:
            first, last = self._interval_number(start - MICROSECOND) + 1, self._interval_number(end - MICROSECOND)
            return min(max(0, last - first + 1), at_most)
        counted = 0
        for _tick in self.between(start, end - MICROSECOND):
            counted += 1
            if counted == at_most:
                break
        return counted

    def next_times(self, moment: datetime, count: int) -> list[datetime]:
        ticks = self.after(moment)
        return [next(ticks) for _ in range(count)]

    def _interval_number(self, moment: datetime) -> int:
        """The number of the last tick at or before ``moment``."""
        return (moment - EPOCH) // timedelta(seconds=self.interval_sec)

    def _interval_tick(self, number: int) -> datetime:
        return EPOCH + timedelta(seconds=number * self.interval_sec)
