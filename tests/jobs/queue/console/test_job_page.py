"""What a job's page is made of: durations, JSON, errors by attempt, runs and attempts from the
journal with each one's wait and run time."""

from datetime import UTC, datetime, timedelta

import pytest

from jobs.queue import services
from jobs.queue.console import job_page as page_module
from jobs.queue.console.job_page import (
    FOLD_LINES,
    JournalRow,
    job_page,
    latest_runs,
    run_attempts,
    runs_of,
    shown,
)
from jobs.queue.console.templatetags.job_times import duration
from jobs.queue.models import Job, JobEvent
from tests.conftest import ALL_DATABASES

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def journal(*rows) -> list[JournalRow]:
    """(seconds after T0, kind, payload) rows as the journal's events."""
    return [JournalRow(n, at(seconds), kind, payload or {}) for n, (seconds, kind, payload) in enumerate(rows, start=1)]


def seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@pytest.mark.parametrize(
    ("seconds_", "text"),
    [(0.85, "850 ms"), (4.21, "4.2 s"), (185, "3 min 5 s"), (7800, "2 h 10 min"), (3 * 86400 + 3600, "3 d 1 h")],
)
def test_durations_read_as_people_say_them(seconds_, text):
    assert duration(timedelta(seconds=seconds_)) == text
    assert duration(None) == "–"


def test_every_json_value_is_shown_empty_ones_too():
    assert [shown(value).text for value in ({}, [], None, "")] == ["{}", "[]", "null", '""']
    short, long = shown({"a": 1}), shown({f"k{i}": i for i in range(FOLD_LINES + 5)})
    assert not short.folded and long.folded and long.first_line == "{"
    assert shown({"name": "Žluťoučký"}).text == '{\n  "name": "Žluťoučký"\n}'


# --- runs and attempts, from the journal ---------------------------------------------------------


def test_waiting_for_other_jobs_is_no_wait_the_wait_counts_from_the_release():
    events = journal(
        (0, "queued", {"depends_on": ["…"], "waiting": True, "available_at": at(0).isoformat()}),
        (60, "requeue", {"reason": "upstream succeeded", "available_at": at(60).isoformat()}),
        (62, "picked", {"attempt": 1}),
        (65, "done", {"attempt": 1}),
    )
    [run] = runs_of(events, status="succeeded", now=at(100))
    assert seconds(run.waited) == 2 and seconds(run.ran) == 3
    [still_waiting] = runs_of(events[:1], status="queued", now=at(30))
    assert still_waiting.waited is None


def test_each_run_and_attempt_has_its_own_wait_and_run_time_and_sitting_failed_counts_as_neither():
    events = journal(
        (0, "queued", {"available_at": at(0).isoformat()}),
        (2, "picked", {"attempt": 1, "worker": "w1"}),
        (5, "requeue", {"attempt": 1, "reason": "retry", "available_at": at(15).isoformat(), "error": "boom 1"}),
        (20, "picked", {"attempt": 2, "worker": "w1"}),  # ready at 15 (the backoff), picked at 20
        (21, "failed", {"attempt": 2, "error": "boom 2"}),
        # an hour failed, then an operator retries
        (3621, "requeue", {"reason": "retry_requested", "by": "ops", "run": 2, "first_attempt": 3}),
        (3622, "picked", {"attempt": 3, "worker": "w2"}),
        (3625, "done", {"attempt": 3, "result": {"rows": 1}}),
    )

    first, second = runs_of(events, status="succeeded", now=at(4000))

    assert (first.number, second.number) == (1, 2)
    assert [(a.number, seconds(a.waited), seconds(a.ran)) for a in first.attempts] == [(1, 2, 3), (2, 5, 1)]
    assert (seconds(first.waited), seconds(first.ran)) == (7, 4)
    assert [(a.number, seconds(a.waited), seconds(a.ran)) for a in second.attempts] == [(3, 1, 3)]
    assert (seconds(second.waited), seconds(second.ran)) == (1, 3)
    assert second.start.event.payload["by"] == "ops"
    assert [line.event.kind for line in first.attempts[0].lines] == ["picked", "requeue"]


def test_a_scheduled_job_waits_from_when_it_is_due_and_a_released_attempt_stays_one_attempt():
    events = journal(
        (0, "queued", {"available_at": at(60).isoformat()}),  # due in a minute
        (61, "picked", {"attempt": 1}),
        (70, "requeue", {"reason": "worker_shutdown", "attempt_returned": 1}),
        (72, "picked", {"attempt": 1}),  # the same attempt, picked again after a deploy
        (80, "done", {"attempt": 1}),
    )

    [run] = runs_of(events, status="succeeded", now=at(100))

    assert [(a.number, seconds(a.waited), seconds(a.ran)) for a in run.attempts] == [(1, 1 + 2, 9 + 8)]


def test_what_is_still_going_is_measured_until_now():
    queued = journal((0, "queued", {}))
    [waiting] = runs_of(queued, status="queued", now=at(30))
    running = journal((0, "queued", {}), (4, "picked", {"attempt": 1}), (6, "heartbeat", {}))
    [going] = runs_of(running, status="running", now=at(10))
    canceled = journal((0, "queued", {}), (9, "canceled", {"by": "ops", "while": "queued"}))
    [never_picked] = runs_of(canceled, status="canceled", now=at(100))

    assert (seconds(waiting.waiting), seconds(waiting.waited), waiting.ran) == (30, 30, None)
    assert (seconds(going.waited), seconds(going.ran), going.running) == (4, 6, True)
    assert [(a.number, seconds(a.waited), a.ran) for a in never_picked.attempts] == [(None, 9, None)]


def test_a_journal_that_starts_mid_run_is_an_earlier_run():
    events = journal((5, "picked", {"attempt": 4}), (6, "failed", {"attempt": 4, "error": "x"}))

    [run] = runs_of(events, status="failed", now=at(10))

    assert run.number is None and run.start is None
    assert [(a.number, a.waited, seconds(a.ran)) for a in run.attempts] == [(4, None, 1)]


# --- the page's and the list's reads --------------------------------------------------------------


def make_job(**fields) -> Job:
    job_id = services.job_enqueue(spec=services.JobSpec(queue="q", task="t", lock_key="k", **fields)).job_id
    return Job.objects.get(job_id=job_id)


def write(job: Job, *rows):
    """(seconds after the job's creation, kind, payload) rows into its journal."""
    for offset, kind, payload in rows:
        JobEvent.objects.create(job=job, queue=job.queue, kind=kind, payload=payload, ts=job.created_at + offset)


@ALL_DATABASES
def test_the_page_groups_runs_and_attempts_newest_first_with_errors_by_attempt():
    job = make_job()
    s = timedelta(seconds=1)
    write(
        job,
        (1 * s, "picked", {"worker": "w1", "attempt": 1}),
        (2 * s, "requeue", {"worker": "w1", "attempt": 1, "reason": "retry", "error": "first", "traceback": "Tb: one"}),
        (3 * s, "picked", {"worker": "w2", "attempt": 2}),
        (4 * s, "failed", {"worker": "w2", "attempt": 2, "error": "second", "traceback": "Tb: two"}),
        (3600 * s, "requeue", {"reason": "retry_requested", "by": "ops", "run": 2, "first_attempt": 3}),
        (3601 * s, "picked", {"worker": "w3", "attempt": 3}),
    )
    Job.objects.filter(job_id=job.job_id).update(status="running", attempt=3)
    job.refresh_from_db()

    page = job_page(job, can_retry=False, can_cancel=False, can_remove=False)

    assert [(e["run"], e["attempt"], e["error"]) for e in page["errors"]] == [(1, 2, "second"), (1, 1, "first")]
    assert page["errors"][0]["traceback"] == "Tb: two"
    runs = page["runs"]
    assert [(run.number, [a.number for a in run.attempts]) for run in runs] == [(1, [1, 2]), (2, [3])]
    assert [line.event.kind for line in runs[0].attempts[0].lines] == ["picked", "requeue"]
    assert page["run"].number == 2 and page["run"].running and seconds(page["run"].waited) == 1
    assert not (page["can_retry"] or page["can_cancel"] or page["can_delete"])


@ALL_DATABASES
def test_heartbeats_fold_into_one_line_per_stretch_and_a_long_journal_says_it_is_cut(monkeypatch):
    job = make_job()
    s = timedelta(seconds=1)
    write(job, (1 * s, "picked", {"worker": "w", "attempt": 1}))
    write(job, *((n * 10 * s, "heartbeat", {"worker": "w"}) for n in range(1, 31)))
    write(job, (305 * s, "done", {"worker": "w", "attempt": 1, "result": None}))
    Job.objects.filter(job_id=job.job_id).update(status="succeeded")
    job.refresh_from_db()

    page = job_page(job, can_retry=False, can_cancel=False, can_remove=False)

    [attempt] = page["runs"][0].attempts
    beats = attempt.lines[1].event
    assert [line.event.kind for line in attempt.lines] == ["picked", "heartbeat", "done"]
    assert (beats.count, beats.ts, beats.last_ts) == (30, job.created_at + 10 * s, job.created_at + 300 * s)
    assert seconds(attempt.ran) == 304 and not page["truncated"]
    assert dict(page["data"])["result"].text == "null"  # the handler returned None: a result, shown as such

    monkeypatch.setattr(page_module, "JOURNAL_EVENTS", 2)
    cut = job_page(job, can_retry=False, can_cancel=False, can_remove=False)
    assert cut["truncated"] and cut["runs"][0].number is None
    assert [line.event.kind for line in cut["runs"][0].attempts[0].lines] == ["picked", "heartbeat", "done"]


@ALL_DATABASES
def test_the_list_reads_each_jobs_latest_run():
    retried, fresh = make_job(), make_job()
    s = timedelta(seconds=1)
    write(retried, (2 * s, "picked", {"attempt": 1}), (3 * s, "failed", {"attempt": 1, "error": "x"}))
    write(retried, (900 * s, "requeue", {"reason": "retry_requested", "run": 2, "first_attempt": 2}))
    write(retried, (904 * s, "picked", {"attempt": 2}), (906 * s, "done", {"attempt": 2}))
    Job.objects.filter(job_id=retried.job_id).update(status="succeeded")

    runs = latest_runs(list(Job.objects.filter(job_id__in=[retried.job_id, fresh.job_id])))

    assert (runs[retried.job_id].number, seconds(runs[retried.job_id].waited), seconds(runs[retried.job_id].ran)) == (
        2,
        4,
        2,
    )
    assert runs[fresh.job_id].number == 1 and runs[fresh.job_id].waiting is not None
    assert latest_runs([]) == {}


def test_attempts_are_counted_in_their_run_as_the_page_shows_them():
    events = journal(
        (0, "queued", {}),
        (2, "picked", {"attempt": 1}),
        (3, "failed", {"attempt": 1, "error": "fatal"}),  # a fatal error at attempt 1 of 5
        (60, "requeue", {"reason": "retry_requested", "run": 2, "first_attempt": 2, "max_attempts": 6}),
        (61, "picked", {"attempt": 2}),
    )
    first, second = runs_of(events, status="running", now=at(70))
    job = Job(attempt=2, max_attempts=6)

    assert (first.first_attempt, second.first_attempt) == (1, 2)
    assert [(a.number, a.in_run) for a in second.attempts] == [(2, 1)]
    assert (
        str(run_attempts(job, second)) == "attempt 1 of 5 · run 2" and run_attempts(job, second).short == "1/5 · run 2"
    )
    assert str(run_attempts(Job(attempt=1, max_attempts=5), first)) == "attempt 1 of 5"
    [mid_run] = runs_of(events[4:], status="running", now=at(70))  # its start not in the journal shown
    assert str(run_attempts(job, mid_run)) == "attempt 2 of 6"
