"""What a job's page is made of: durations, folded JSON, errors by attempt, the timeline."""

from datetime import timedelta

import pytest

from jobs import services
from jobs.job_page import FOLD_LINES, job_page, shown
from jobs.models import Job, JobEvent
from jobs.templatetags.job_times import duration
from tests.conftest import ALL_DATABASES


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.85, "850 ms"), (4.21, "4.2 s"), (185, "3 min 5 s"), (7800, "2 h 10 min"), (3 * 86400 + 3600, "3 d 1 h")],
)
def test_durations_read_as_people_say_them(seconds, text):
    assert duration(timedelta(seconds=seconds)) == text
    assert duration(None) == "–"


def test_long_json_is_folded_and_empty_json_is_none():
    assert shown({}) is None and shown(None) is None
    short, long = shown({"a": 1}), shown({f"k{i}": i for i in range(FOLD_LINES + 5)})
    assert not short.folded and long.folded and long.first_line == "{"
    assert shown({"name": "Žluťoučký"}).text == '{\n  "name": "Žluťoučký"\n}'


@ALL_DATABASES
def test_errors_come_newest_first_and_events_group_by_attempt():
    job_id = services.job_enqueue(spec=services.JobSpec(queue="q", task="t", lock_key="k")).job_id
    job = Job.objects.get(job_id=job_id)
    for kind, payload in [
        ("picked", {"worker": "w1", "attempt": 1}),
        ("failed", {"worker": "w1", "attempt": 1, "error": "first", "traceback": "Traceback: one"}),
        ("requeue", None),
        ("picked", {"worker": "w2", "attempt": 2}),
        ("failed", {"worker": "w2", "attempt": 2, "error": "second", "traceback": "Traceback: two"}),
    ]:
        JobEvent.objects.create(job=job, queue="q", kind=kind, payload=payload)

    page = job_page(job, can_repair=False, can_remove=False)

    assert [error["error"] for error in page["errors"]] == ["second", "first"]
    assert page["errors"][0]["traceback"] == "Traceback: two"
    assert [(a["attempt"], [e["event"].kind for e in a["events"]]) for a in page["attempts"]] == [
        (2, ["picked", "failed"]),
        (1, ["queued", "picked", "failed", "requeue"]),
    ]
    assert page["attempts"][0]["events"][0]["worker"] == "w2"
    assert not (page["can_retry"] or page["can_cancel"] or page["can_delete"])
