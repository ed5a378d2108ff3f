"""The job list's states: each job in one, the tabs' counts (kept counts, and bounded reads of the
queued jobs, "n+" where a read stopped short), each tab's filter with the queue, task, search and
keyset pagination, and the list's body as a fragment for its live refresh."""

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.queue import services
from jobs.queue.console import job_states
from jobs.queue.console.job_states import STATES, Count, state_counts, state_filter
from jobs.queue.models import Job
from jobs.queue.states import WAITING_AVAILABLE_AT, shown_state
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES

CHANGELIST = "/admin/jobs/job/"
# How many jobs of each state every_state() makes, on queue "q1" (and one more of each on "q2").
MADE = {
    "available": 3,
    "scheduled": 2,
    "waiting": 1,
    "running": 2,
    "retryable": 2,
    "succeeded": 4,
    "failed": 1,
    "canceled": 1,
    "lost": 1,
}


def make(state: str, *, queue: str = "q1", task: str = "reports.build") -> uuid.UUID:
    """A job put straight into ``state`` (its queue served by no worker)."""
    now = timezone.now()
    spec = {"queue": queue, "task": task, "lock_key": f"k-{uuid.uuid4()}"}
    if state == "waiting":
        upstream = services.job_enqueue(spec=services.JobSpec(**{**spec, "lock_key": f"u-{uuid.uuid4()}"}))
        Job.objects.filter(job_id=upstream.job_id).update(status="running", attempt=1)
        spec["depends_on"] = [upstream.job_id]
    if state in ("scheduled", "retryable"):
        spec["available_at"] = now + timedelta(hours=1)
    job_id = services.job_enqueue(spec=services.JobSpec(**spec)).job_id
    if state == "retryable":
        Job.objects.filter(job_id=job_id).update(attempt=1, error="TimeoutError")
    elif state not in ("available", "scheduled", "waiting"):
        Job.objects.filter(job_id=job_id).update(status=state, attempt=1)
    return job_id


@pytest.fixture
def every_state() -> dict[str, list[uuid.UUID]]:
    made = {state: [make(state) for _ in range(n)] for state, n in MADE.items()}
    for state in MADE:
        made[state].append(make(state, queue="q2", task="sync.pull"))
    return made


def test_a_queued_job_is_available_scheduled_retryable_or_waiting_by_when_it_is_due():
    now = timezone.now()
    later, earlier = now + timedelta(seconds=1), now - timedelta(seconds=1)

    assert shown_state("queued", earlier, 0, now) == shown_state("queued", now, 3, now) == "available"
    assert shown_state("queued", later, 0, now) == "scheduled"
    assert shown_state("queued", later, 2, now) == "retryable"
    assert shown_state("queued", WAITING_AVAILABLE_AT, 0, now) == "waiting"
    assert shown_state("failed", later, 2, now) == "failed"


def test_the_counts_of_every_state_for_the_queue_and_task_chosen(every_state):
    # The upstream jobs of the waiting ones run too (one per waiting job).
    running = MADE["running"] + MADE["waiting"]

    counts = state_counts()
    assert {state: counts[state] for state in STATES} == {
        **{state: Count(n + 1) for state, n in MADE.items()},
        "running": Count(running + 2),
    }
    assert counts["all"] == Count(sum(MADE.values()) + len(MADE) + 2)  # and the two upstream jobs
    of_q1 = state_counts(queue="q1")
    assert of_q1["available"] == Count(3) and of_q1["scheduled"] == Count(2) and of_q1["running"] == Count(running)
    of_task = state_counts(task="sync.pull")
    assert {state: of_task[state].n for state in STATES} == {**dict.fromkeys(MADE, 1), "running": 2}
    assert state_counts(queue="q1", task="sync.pull")["available"] == Count(0)
    assert state_counts(queue="no-such-queue")["available"] == Count(0)


def test_a_range_read_past_the_cap_is_a_lower_bound_unless_the_kept_count_settles_it(monkeypatch):
    monkeypatch.setattr(job_states, "COUNTED_AT_MOST", 3)
    for state, n in (("available", 5), ("scheduled", 1), ("retryable", 1)):
        [make(state) for _ in range(n)]

    # Only the due range was read past the cap (4 of 5 jobs): the kept queued count less the rest.
    assert state_counts()["available"] == Count(5)
    [make("scheduled") for _ in range(3)]
    counts = state_counts()
    # Two ranges past it: neither is known, each shown as at least the cap.
    assert not counts["available"].exact and str(counts["available"]) == "3+"
    assert not counts["scheduled"].exact and str(counts["scheduled"]).endswith("+")
    assert counts["waiting"] == Count(0)
    assert state_counts(task="sync.pull")["available"] == Count(0)  # no queue has its jobs: none read


def test_a_count_reads_whole_or_at_least():
    assert str(Count(12_345)) == "12,345"
    assert str(Count(12_345, exact=False)) == "1,000+" and str(Count(37, exact=False)) == "37+"


def test_each_state_filters_to_its_jobs(every_state):
    for state in STATES:
        found = set(state_filter(Job.objects.all(), state).values_list("job_id", flat=True))
        expected = set(every_state[state])
        if state == "running":  # and the upstream jobs of the waiting ones
            assert expected < found and len(found) == len(expected) + MADE["waiting"] + 1
        else:
            assert found == expected, state


def listed(response) -> list:
    return [job.job_id for job in response.context["cl"].result_list]


def test_the_tabs_show_their_counts_and_filter_the_list_with_the_other_filters_and_pages(admin_client, every_state):
    html = admin_client.get(CHANGELIST, {"queue": "q1"}).content.decode()
    tabs = dict(re.findall(r'data-state="(\w+)".*?class="tab-count">([\d,+]+)<', html))
    assert tabs == {**{state: str(n) for state, n in MADE.items()}, "running": "3", "all": "18"}
    assert 'href="?queue=q1&amp;state=scheduled"' in html  # the queue filter kept
    assert 'data-state="all" data-shortcut="0"' in html and 'data-state="lost" data-shortcut="9"' in html

    scheduled = admin_client.get(CHANGELIST, {"queue": "q1", "state": "scheduled"})
    assert set(listed(scheduled)) == set(every_state["scheduled"][:2])
    assert 'class="active" aria-current="page"><span class="tab-dot s-scheduled"' in scheduled.content.decode()
    assert scheduled.context["cl"].result_count == 2  # the count is the tab's

    retryable = admin_client.get(CHANGELIST, {"state": "retryable", "task": "sync.pull"})
    assert listed(retryable) == [every_state["retryable"][-1]]
    key = Job.objects.get(job_id=every_state["failed"][0]).lock_key
    assert listed(admin_client.get(CHANGELIST, {"state": "failed", "q": key})) == [every_state["failed"][0]]
    assert listed(admin_client.get(CHANGELIST, {"state": "succeeded", "q": key})) == []

    newest, *older = sorted(every_state["succeeded"], reverse=True)
    page = admin_client.get(CHANGELIST, {"state": "succeeded", "before": str(newest)})
    assert listed(page) == older
    assert admin_client.get(CHANGELIST, {"state": "bogus"}).status_code in (200, 302)  # refused, not a 500


def test_the_rows_say_when_a_queued_job_is_due_and_what_it_waits_for(admin_client, every_state):
    html = admin_client.get(CHANGELIST, {"queue": "q1"}).content.decode()
    rows = {
        job_id: row
        for row in re.findall(r"<tr>.*?</tr>", html, re.DOTALL)
        for job_id in re.findall(r'name="_selected_action" value="([^"]+)"', row)
    }

    scheduled = rows[str(every_state["scheduled"][0])]
    assert 's-scheduled">scheduled<' in scheduled and re.search(
        r'due <time class="countdown"[^>]*>in 59 min', scheduled
    )
    assert 'next attempt <time class="countdown"' in rows[str(every_state["retryable"][0])]
    waiting = rows[str(every_state["waiting"][0])]
    assert ">for 1 job · queue paused" not in waiting and "for 1 job" in waiting
    assert "no live worker serves queue q1" in rows[str(every_state["available"][0])]
    assert "1/5" in rows[str(every_state["retryable"][0])]


def test_the_list_answers_its_body_as_a_fragment_with_the_filters_kept(admin_client, every_state):
    fragment = admin_client.get(CHANGELIST, {"state": "available", "queue": "q2", "fragment": "1"})

    body = fragment.content.decode()
    assert fragment.status_code == 200 and body.lstrip().startswith('<div class="job-list-body">')
    assert "<html" not in body and 'class="state-tabs"' in body and 'id="result_list"' in body
    assert listed(fragment) == every_state["available"][-1:]
    assert 'href="?queue=q2&amp;state=scheduled"' in body  # no "fragment" in the links
