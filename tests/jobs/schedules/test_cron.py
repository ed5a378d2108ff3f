"""Ticks: cron expressions in a time zone across daylight saving changes (as Debian's cron runs
them, through cronsim), intervals on their multiples since the epoch, and the field a bad
expression breaks."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.schedules.cron import Timing, cron_problem, timezone_problem


def utc(*parts) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def iso(times) -> list[str]:
    return [moment.isoformat() for moment in times]


def test_a_fixed_time_in_the_hour_that_is_skipped_runs_once_right_after_the_change():
    # Prague springs forward on 2026-03-29 at 02:00 CET to 03:00 CEST: 02:30 does not exist.
    timing = Timing(cron="30 2 * * *", timezone="Europe/Prague")
    assert iso(timing.next_times(utc(2026, 3, 27), 3)) == [
        "2026-03-27T01:30:00+00:00",  # 02:30 CET
        "2026-03-28T01:30:00+00:00",
        "2026-03-29T01:00:00+00:00",  # 03:00 CEST, the first minute after the gap
    ]


def test_a_fixed_time_in_the_hour_that_repeats_runs_once():
    # Prague falls back on 2026-10-25 at 03:00 CEST to 02:00 CET: 02:30 happens twice.
    timing = Timing(cron="30 2 * * *", timezone="Europe/Prague")
    assert iso(timing.next_times(utc(2026, 10, 24), 3)) == [
        "2026-10-24T00:30:00+00:00",
        "2026-10-25T00:30:00+00:00",  # the first 02:30 (CEST) only
        "2026-10-26T01:30:00+00:00",
    ]
    # Asked during the second pass of the hour (02:40 CET), it does not run 02:30 or 02:50 again.
    assert timing.next_times(utc(2026, 10, 25, 1, 40), 1) == [utc(2026, 10, 26, 1, 30)]
    assert Timing(cron="50 2 * * *", timezone="Europe/Prague").next_times(utc(2026, 10, 25, 1, 40), 1) == [
        utc(2026, 10, 26, 1, 50)
    ]


def test_a_wildcard_hour_runs_in_both_passes_of_the_repeated_hour():
    timing = Timing(cron="0,30 * * * *", timezone="America/New_York")
    # New York falls back on 2026-11-01 at 02:00 EDT to 01:00 EST.
    ticks = timing.next_times(utc(2026, 11, 1, 4, 59), 6)
    assert iso(ticks) == [
        "2026-11-01T05:00:00+00:00",  # 01:00 EDT
        "2026-11-01T05:30:00+00:00",
        "2026-11-01T06:00:00+00:00",  # 01:00 EST
        "2026-11-01T06:30:00+00:00",
        "2026-11-01T07:00:00+00:00",  # 02:00 EST
        "2026-11-01T07:30:00+00:00",
    ]


def test_before_walks_back_and_count_counts_a_half_open_range():
    timing = Timing(cron="*/15 * * * *")
    assert iso([next(timing.before(utc(2026, 1, 1, 1)))]) == ["2026-01-01T00:45:00+00:00"]
    assert timing.count(utc(2026, 1, 1), utc(2026, 1, 1, 1), at_most=100) == 4  # 00:00 .. 00:45
    assert timing.count(utc(2026, 1, 1), utc(2026, 1, 2), at_most=10) == 10
    assert list(timing.between(utc(2026, 1, 1), utc(2026, 1, 1, 0, 15))) == [utc(2026, 1, 1), utc(2026, 1, 1, 0, 15)]


def test_an_interval_ticks_on_its_multiples_since_the_epoch():
    every_minute = Timing(interval_sec=60)
    assert every_minute.next_times(utc(2026, 1, 1, 0, 0, 30), 2) == [utc(2026, 1, 1, 0, 1), utc(2026, 1, 1, 0, 2)]
    assert next(every_minute.before(utc(2026, 1, 1, 0, 1))) == utc(2026, 1, 1, 0, 0)
    every_second = Timing(interval_sec=1)
    start = utc(2026, 1, 1) + timedelta(microseconds=500_000)
    assert every_second.count(start, start + timedelta(seconds=10), at_most=100) == 10
    assert every_second.count(start, start + timedelta(seconds=10), at_most=3) == 3


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("61 * * * *", "Bad minute field"),
        ("* 24 * * *", "Bad hour field"),
        ("0 0 32 * *", "Bad day-of-month field"),
        ("0 0 * 13 *", "Bad month field"),
        ("0 0 * * 8", "Bad day-of-week field"),
        ("0 0 30 2 *", "Bad day-of-month field"),
        ("* * * *", "Use five fields"),
        ("0 * * * * *", "Use five fields"),
        ("", "Use five fields"),
        ("0\x00 * * * *", "NUL"),
    ],
)
def test_a_bad_expression_names_its_field(expression, problem):
    assert problem in cron_problem(expression)


def test_good_expressions_and_time_zones_pass():
    for expression in ("*/5 * * * *", "0 6 * * MON-FRI", "0 0 L * *", "0 9 * * 1#1", "15 3 1,15 JAN,JUL *"):
        assert cron_problem(expression) is None, expression
    assert timezone_problem("Europe/Prague") is None
    for name in ("Mars/Olympus", "../../etc/passwd", "", "Europe/Prague\x00"):
        assert "IANA" in timezone_problem(name)
