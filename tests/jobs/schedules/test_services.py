"""Schedules' services: the rules and defaults, the ticks due under each missed policy, every tick
enqueued once however many callers race, run now, pause and resume, and the schedules declared
in code."""

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.queue.handlers import Registry, TaskSchedule
from jobs.queue.models import Job, JobEvent
from jobs.runtime.registry import run_start_hooks
from jobs.schedules import services
from jobs.schedules.cron import Timing
from jobs.schedules.models import Schedule
from jobs.schedules.services.rules import database_now
from pipeline_project.api.errors import ConflictError, InvalidInputError, NotFoundError
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import run_in_threads
from tests.jobs.schedules.conftest import make, utc


def keys(schedule) -> list[str]:
    return list(
        Job.objects.filter(idempotency_key__startswith=f"schedule:{schedule.pk}:")
        .order_by("idempotency_key")
        .values_list("idempotency_key", flat=True)
    )


@pytest.mark.parametrize(
    ("policy", "expected", "skipped"),
    [
        ("skip", ["01:00"], 60),
        ("once", ["00:59", "01:00"], 59),
        ("catch_up", ["00:57", "00:58", "00:59", "01:00"], 57),
    ],
)
def test_missed_ticks_follow_the_policy_and_late_ones_always_run(policy, expected, skipped):
    # Every minute from 00:00, checked at 01:00:30 with a minute's grace: 00:00 .. 00:59 are missed
    # (more than 60 s late), 01:00 is only late.
    due = services.due_ticks(
        Timing(interval_sec=60),
        next_run_at=utc(2026, 1, 1),
        now=utc(2026, 1, 1, 1, 0, 30),
        grace_sec=60,
        policy=policy,
        catch_up_max=3,
    )
    assert [f"{tick:%H:%M}" for tick in due.ticks] == expected
    assert due.skipped == skipped
    assert due.next_run_at == utc(2026, 1, 1, 1, 1)


def test_nothing_missed_means_nothing_skipped_under_any_policy():
    for policy in ("skip", "once", "catch_up"):
        due = services.due_ticks(
            Timing(cron="*/5 * * * *", timezone="Europe/Prague"),
            next_run_at=utc(2026, 1, 1, 0, 5),
            now=utc(2026, 1, 1, 0, 10, 1),
            grace_sec=301,  # 00:05 is 5 min 1 s late: late, not missed
            policy=policy,
            catch_up_max=10,
        )
        assert (due.ticks, due.skipped) == ([utc(2026, 1, 1, 0, 5), utc(2026, 1, 1, 0, 10)], 0)


@ALL_DATABASES
def test_create_fills_the_defaults_and_starts_at_the_first_tick_after_now():
    before = database_now()
    schedule = make("reports.hourly", interval_sec=3600, args={"kind": "hourly"})
    assert (schedule.queue, schedule.priority, schedule.timezone, schedule.missed_policy) == (
        "default",
        100,
        "UTC",
        "skip",
    )
    assert before < schedule.next_run_at <= before + timedelta(hours=1)
    assert schedule.next_run_at.minute == schedule.next_run_at.second == 0
    assert not schedule.paused and not schedule.declared_in_code


@ALL_DATABASES
@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"cron": "0 25 * * *"}, "cron"),
        ({"cron": "0 6 * * *", "timezone": "Europe/Praha"}, "timezone"),
        ({"cron": "0 6 * * *", "interval_sec": 60}, "cron"),
        ({"interval_sec": 0}, "interval_sec"),
        ({"interval_sec": 60, "queue": "no spaces"}, "queue"),
        ({"interval_sec": 60, "priority": -1}, "priority"),
        ({"interval_sec": 60, "args": [1]}, "args"),
        ({"interval_sec": 60, "missed_policy": "later"}, "missed_policy"),
        ({"interval_sec": 60, "catch_up_max": 0}, "catch_up_max"),
        ({"interval_sec": 60, "lock_key": "x" * 2000}, "lock_key"),
        ({"interval_sec": 60, "color": "red"}, "color"),
    ],
)
def test_a_broken_rule_is_a_400_naming_its_field_and_writes_nothing(values, field):
    with pytest.raises(InvalidInputError) as raised:
        services.schedule_create(values={"name": "broken", "task": "test.echo", **values}, by="tester")
    assert field in raised.value.details
    assert not Schedule.objects.exists()


@ALL_DATABASES
def test_a_due_tick_becomes_one_job_with_its_journal_and_the_schedule_moves_on():
    schedule = make("every.minute", due_at=utc(2026, 1, 1, 12), args={"report": 7}, priority=5)

    totals = services.schedules_enqueue_due(now=utc(2026, 1, 1, 12, 0, 0, 400_000))
    again = services.schedules_enqueue_due(now=utc(2026, 1, 1, 12, 0, 0, 900_000))

    job = Job.objects.get()
    assert (totals, again) == ({"enqueued": 1, "skipped": 0, "failed": 0}, {"enqueued": 0, "skipped": 0, "failed": 0})
    assert job.idempotency_key == f"schedule:{schedule.pk}:2026-01-01T12:00:00Z"
    assert (job.task, job.args, job.priority, job.lock_key, job.producer) == (
        "test.echo",
        {"report": 7},
        5,
        "schedule:every.minute",
        "schedule:every.minute",
    )
    assert list(JobEvent.objects.filter(job_id=job.job_id).values_list("kind", flat=True)) == ["queued"]
    schedule.refresh_from_db()
    assert (schedule.next_run_at, schedule.last_tick_at, schedule.last_job_id) == (
        utc(2026, 1, 1, 12, 1),
        utc(2026, 1, 1, 12),
        job.job_id,
    )


@ALL_DATABASES
def test_missed_ticks_are_recorded_on_the_schedule(settings):
    settings.DL_SCHEDULES_GRACE_SEC = 60
    schedule = make("catching.up", due_at=utc(2026, 1, 1), missed_policy="catch_up", catch_up_max=2)
    paused = make("paused", due_at=utc(2026, 1, 1))
    services.schedule_pause(schedule_id=paused.pk, by="tester")

    totals = services.schedules_enqueue_due(now=utc(2026, 1, 1, 1, 0, 30))

    assert totals == {"enqueued": 3, "skipped": 58, "failed": 0}
    assert [key.rsplit(":", 2)[-2][-2:] for key in keys(schedule)] == ["58", "59", "00"]  # minutes
    schedule.refresh_from_db()
    assert (schedule.last_skipped, schedule.last_skipped_at) == (58, utc(2026, 1, 1, 1, 0, 30))
    assert keys(paused) == []


@ALL_DATABASES
def test_a_tick_whose_transaction_is_rolled_back_leaves_nothing():
    schedule = make("rolled.back", due_at=utc(2026, 1, 1))

    class Killed(Exception):
        pass

    with pytest.raises(Killed):
        from django.db import transaction

        with transaction.atomic():
            services.schedules_enqueue_due(now=utc(2026, 1, 1, 0, 0, 1))
            raise Killed

    assert not Job.objects.exists()
    schedule.refresh_from_db()
    assert (schedule.next_run_at, schedule.last_job_id) == (utc(2026, 1, 1), None)


@ALL_DATABASES_COMMITTED
def test_four_threads_enqueuing_at_once_make_one_job_per_tick():
    start = database_now().replace(microsecond=0) - timedelta(seconds=5)
    schedules = [make(f"every.second.{i}", interval_sec=1, due_at=start) for i in range(3)]
    deadline = time.monotonic() + 3

    def tick_until_deadline(_index):
        while time.monotonic() < deadline:
            services.schedules_enqueue_due()

    run_in_threads(4, tick_until_deadline)
    before = database_now()
    services.schedules_enqueue_due()
    after = database_now()  # the last enqueue saw a moment between the two: a second may have begun

    for schedule in schedules:
        found = keys(schedule)
        ticks = [start + timedelta(seconds=n) for n in range(int((after - start).total_seconds()) + 1)]
        expected = [f"schedule:{schedule.pk}:{tick:%Y-%m-%dT%H:%M:%SZ}" for tick in ticks]
        due_before = sum(1 for tick in ticks if tick <= before)
        assert found == expected[: len(found)] and len(found) >= due_before  # every tick to now, none twice
    assert JobEvent.objects.filter(kind="queued").count() == Job.objects.count()


@ALL_DATABASES
def test_run_now_enqueues_one_more_job_and_links_it():
    schedule = make("run.me")
    services.schedule_pause(schedule_id=schedule.pk, by="tester")

    first = services.schedule_run_now(schedule_id=schedule.pk, by="operator")
    second = services.schedule_run_now(schedule_id=schedule.pk, by="operator")

    assert first.created and second.created and first.job_id != second.job_id
    job = Job.objects.get(job_id=second.job_id)
    assert job.idempotency_key.startswith(f"schedule:{schedule.pk}:manual:") and job.producer == "operator"
    schedule.refresh_from_db()
    assert schedule.last_job_id == second.job_id
    with pytest.raises(NotFoundError):
        services.schedule_run_now(schedule_id=schedule.pk + 1000, by="operator")


@ALL_DATABASES
def test_pause_and_resume_say_whether_they_changed_anything_and_resume_skips_the_paused_ticks():
    schedule = make("pausing", due_at=utc(2026, 1, 1))
    assert services.schedule_pause(schedule_id=schedule.pk, by="a")[1] is True
    assert services.schedule_pause(schedule_id=schedule.pk, by="a")[1] is False

    resumed, changed = services.schedule_resume(schedule_id=schedule.pk, by="b")

    assert changed and not resumed.paused and resumed.changed_by == "b"
    assert resumed.next_run_at > database_now() - timedelta(seconds=1)
    assert services.schedule_resume(schedule_id=schedule.pk, by="b")[1] is False


@ALL_DATABASES
def test_update_changes_timing_from_now_and_setting_cron_clears_the_interval():
    schedule = make("changing", due_at=utc(2026, 1, 1))

    changed = services.schedule_update(
        schedule_id=schedule.pk, changes={"cron": "0 6 * * *", "timezone": "Europe/Prague"}, by="b"
    )

    assert (changed.cron, changed.interval_sec, changed.changed_by) == ("0 6 * * *", None, "b")
    assert changed.next_run_at > database_now()
    assert changed.next_run_at.astimezone(Timing(timezone="Europe/Prague").zone()).hour == 6
    args_only = services.schedule_update(schedule_id=schedule.pk, changes={"args": {"x": 1}}, by="c")
    assert args_only.next_run_at == changed.next_run_at  # same timing, same next run
    with pytest.raises(InvalidInputError) as raised:
        services.schedule_update(schedule_id=schedule.pk, changes={"cron": "0 6 * *"}, by="c")
    assert "cron" in raised.value.details


@ALL_DATABASES
def test_names_are_unique():
    make("same.name")
    with pytest.raises(ConflictError):
        make("same.name")
    other = make("other.name")
    with pytest.raises(ConflictError):
        services.schedule_update(schedule_id=other.pk, changes={"name": "same.name"}, by="b")


def declaring_registry(**schedule) -> Registry:
    handlers = Registry()

    @handlers.task("reports.daily", schedule=TaskSchedule(**schedule) if schedule else "0 6 * * *")
    def daily(ctx):
        return None

    @handlers.task("cache.warm", schedule=timedelta(minutes=5))
    def warm(ctx):
        return None

    return handlers


def test_a_task_declares_its_schedule_beside_it():
    handlers = declaring_registry(cron="0 6 * * *", timezone="Europe/Prague", args={"kind": "daily"}, name="daily")
    assert handlers.schedules() == [
        {"name": "cache.warm", "task": "cache.warm", "args": {}, "cron": None, "interval_sec": 300},
        {
            "name": "daily",
            "task": "reports.daily",
            "args": {"kind": "daily"},
            "cron": "0 6 * * *",
            "interval_sec": None,
            "timezone": "Europe/Prague",
        },
    ]


@ALL_DATABASES
def test_a_starting_worker_declares_its_schedules_and_keeps_what_operators_changed():
    run_start_hooks(declaring_registry())
    daily = Schedule.objects.get(name="reports.daily")
    assert daily.declared_in_code and daily.created_by == "code" and daily.cron == "0 6 * * *"
    services.schedule_pause(schedule_id=daily.pk, by="operator")

    assert services.schedules_declare(declared=declaring_registry().schedules()) == 0  # a restart: nothing
    declared_at = timezone.now()
    run_start_hooks(declaring_registry(cron="0 7 * * *"))

    daily.refresh_from_db()
    seven = declared_at.replace(hour=7, minute=0, second=0, microsecond=0)  # the new cron's next tick
    assert daily.paused and daily.cron == "0 7 * * *"
    assert daily.next_run_at == (seven if seven > declared_at else seven + timedelta(days=1))
    with pytest.raises(ConflictError) as raised:
        services.schedule_update(schedule_id=daily.pk, changes={"priority": 1}, by="operator")
    assert raised.value.code == "declared_in_code"


@ALL_DATABASES
def test_a_bad_declaration_refuses_the_start_and_writes_nothing():
    with pytest.raises(InvalidInputError) as raised:
        run_start_hooks(declaring_registry(cron="0 6 * *"))
    assert "cron" in raised.value.details["schedules"]["reports.daily"]
    assert not Schedule.objects.exists()


@ALL_DATABASES_COMMITTED
def test_workers_starting_together_declare_each_schedule_once():
    results = run_in_threads(4, lambda _index: services.schedules_declare(declared=declaring_registry().schedules()))
    assert sorted(results) == [0, 0, 0, 2]
    assert Schedule.objects.count() == 2
