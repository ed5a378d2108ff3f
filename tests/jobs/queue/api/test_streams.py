"""The NDJSON events stream, through the ASGI handler: in order, resumable, following a job to its end."""

import json
import threading
import time

import pytest
from django.db import connections

from jobs.queue import services
from jobs.queue.models import JobEvent
from pipeline_project.web.ndjson import OPEN_STREAMS
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import asgi_get
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES_COMMITTED  # the stream reads on connections of its own: it sees committed rows


def events_of(job_id, query: str = "", *, token: str, **headers) -> list[dict]:
    status, response_headers, body = asgi_get(f"/api/v1/jobs/{job_id}/events{query}", token=token, **headers)
    assert status == 200 and response_headers["Content-Type"] == "application/x-ndjson", body
    return [json.loads(line) for line in body.decode().splitlines()]


def claim_and_finish(queue="default"):
    claimed = services.jobs_claim(queue=queue, limit=1, worker_id="w")
    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed[0].lease, kind="succeeded", result=1)], worker_id="w"
    )
    connections.close_all()


def test_events_dump_in_order_and_close(api_token):
    enqueued = enqueue(task="t")
    services.jobs_claim(queue="default", limit=1, worker_id="w")

    events = events_of(enqueued.job_id, "?follow=false", token=api_token)

    assert [event["kind"] for event in events] == ["queued", "picked"]
    assert events[0]["event_id"] < events[1]["event_id"]
    assert set(events[0]) == {"event_id", "job_id", "queue", "ts", "kind", "payload"}
    assert events[0]["job_id"] == str(enqueued.job_id) and events[0]["ts"].endswith("Z")
    assert events[1]["payload"] == {"worker": "w", "attempt": 1}


def test_events_resume_after_an_event_id_from_the_query_or_last_event_id(api_token):
    enqueued = enqueue(task="t")
    services.jobs_claim(queue="default", limit=1, worker_id="w")
    first = JobEvent.objects.filter(job_id=enqueued.job_id).first().event_id

    by_query = events_of(enqueued.job_id, f"?follow=false&after={first}", token=api_token)
    by_header = events_of(enqueued.job_id, "?follow=false", token=api_token, **{"Last-Event-ID": str(first)})

    assert [event["kind"] for event in by_query] == [event["kind"] for event in by_header] == ["picked"]


def test_events_follow_until_the_job_finishes_woken_by_notify(api_token, settings):
    settings.DL_EVENTS_RECHECK_SEC = 30  # only the NOTIFY can wake the stream in time
    enqueued = enqueue(task="t")
    timer = threading.Timer(0.5, claim_and_finish)
    timer.start()

    started = time.monotonic()
    events = events_of(enqueued.job_id, token=api_token)
    timer.join()

    assert [event["kind"] for event in events] == ["queued", "picked", "done"]
    assert time.monotonic() - started < 5
    assert OPEN_STREAMS.labels(stream="job_events")._value.get() == 0


def test_events_of_a_finished_job_close_at_once(api_token):
    enqueued = enqueue(task="t")
    services.job_cancel(job_id=enqueued.job_id)

    assert [event["kind"] for event in events_of(enqueued.job_id, token=api_token)] == ["queued", "canceled"]


def test_a_followed_stream_ends_after_the_longest_follow(api_token, settings):
    settings.DL_EVENTS_MAX_FOLLOW_SEC = 0.5
    enqueued = enqueue(task="t")

    started = time.monotonic()
    events = events_of(enqueued.job_id, token=api_token)

    assert [event["kind"] for event in events] == ["queued"] and time.monotonic() - started < 3


@pytest.mark.parametrize(
    ("query", "headers"),
    [
        ("?follow=maybe", {}),
        ("?after=-1", {}),
        ("?after=x", {}),
        ("?after=%C2%B2", {}),  # ²: a digit to str.isdigit, not to us
        ("?follow=false", {"Last-Event-ID": "²"}),
        ("?follow=false", {"Last-Event-ID": "-5"}),
    ],
)
def test_events_reject_bad_parameters(api_token, query, headers):
    enqueued = enqueue(task="t")

    status, _headers, body = asgi_get(f"/api/v1/jobs/{enqueued.job_id}/events{query}", token=api_token, **headers)

    assert status == 400 and json.loads(body)["code"] == "validation_error"


def test_an_unknown_job_is_a_404_before_the_stream_starts(api_token):
    status, headers, body = asgi_get("/api/v1/jobs/00000000-0000-0000-0000-000000000000/events", token=api_token)

    assert status == 404 and headers["Content-Type"] == "application/json" and json.loads(body)["code"] == "not_found"
