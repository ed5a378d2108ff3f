"""The client's HTTP behaviour, against scripted answers (no service): joining URLs, the retry
policy (connection errors, 429 and 503 with Retry-After, what a claim may not repeat), errors as
exceptions, following ``next`` links and resuming a broken event stream."""

import json
import time
import uuid

import httpx
import pytest
from pipeline_client import ApiError, ConnectionFailedError, InvalidRequestError, NotFoundError, UnavailableError

from tests.clients.helpers import Scripted, client, error

JOB_ID = str(uuid.uuid4())
JOB = {
    "job_id": JOB_ID,
    "status": "running",
    "attempt": 1,
    "queue": "default",
    "task": "jobs.sleep",
    "args": {},
    "lock_key": "k",
    "progress": {},
    "created_at": "2026-01-01T00:00:00Z",
    "a_field_a_newer_service_adds": True,
}
CLAIMED = {"stage": "shard-worker", "items": [{"filename": "f", "shard": 0, "created_at": "2026-01-01T00:00:00Z"}]}


def ok(body) -> httpx.Response:
    return httpx.Response(200, json=body)


@pytest.mark.parametrize(
    ("base_url", "prefix"),
    [
        ("http://service", ""),
        ("http://service/", ""),
        ("http://service/pipeline-control", "/pipeline-control"),
        ("http://service/pipeline-control/", "/pipeline-control"),
    ],
)
def test_paths_are_joined_under_the_base_url_with_or_without_its_slash(base_url, prefix):
    transport = Scripted(ok(JOB))
    job = client(base_url, "pcp_key", transport=transport).jobs.status(JOB_ID)

    assert job.job_id == JOB_ID and job.created_at.year == 2026
    sent = transport.requests[0]
    assert sent.url.path == f"{prefix}/api/v1/jobs/{JOB_ID}/status"
    assert sent.headers["Authorization"] == "Bearer pcp_key"


def test_429_and_503_are_retried_after_the_wait_retry_after_asks_for():
    transport = Scripted(error(429, "throttled", retry_after="1"), error(503, "database_unavailable"), ok(JOB))
    started = time.monotonic()

    job = client("http://service", "key", transport=transport).jobs.status(JOB_ID)

    assert job.status == "running" and len(transport.requests) == 3
    assert time.monotonic() - started >= 1.0


def test_an_answer_still_unavailable_after_the_retries_is_raised_with_its_wait():
    transport = Scripted(*[error(503, "database_unavailable", retry_after="0")] * 3)

    with pytest.raises(UnavailableError) as raised:
        client("http://service", "key", retries=2, transport=transport).jobs.status(JOB_ID)

    assert (raised.value.status, raised.value.code, raised.value.retry_after) == (503, "database_unavailable", 0)
    assert len(transport.requests) == 3


def test_connection_errors_are_retried_then_raised_as_connection_failed():
    refused = httpx.ConnectError("connection refused")
    transport = Scripted(refused, httpx.ReadTimeout("slow"), ok(JOB))
    assert client("http://service", "key", transport=transport).jobs.status(JOB_ID).job_id == JOB_ID

    transport = Scripted(refused, refused, refused)
    with pytest.raises(ConnectionFailedError):
        client("http://service", "key", retries=2, transport=transport).jobs.status(JOB_ID)
    assert len(transport.requests) == 3


def test_a_claim_is_repeated_only_when_the_service_surely_did_not_take_it():
    # Refused before it was sent, or turned away unprocessed (429): repeated.
    transport = Scripted(httpx.ConnectError("refused"), error(429, "throttled", retry_after="0"), ok(CLAIMED))
    items = client("http://service", "key", transport=transport).tracking.claim("shard-worker", limit=1)
    assert [(item.filename, item.shard) for item in items] == [("f", 0)]

    # A 503 or a lost answer may have claimed rows: a repeat would claim others, so it is raised.
    transport = Scripted(error(503, "database_unavailable", retry_after="0"), ok(CLAIMED))
    with pytest.raises(UnavailableError):
        client("http://service", "key", transport=transport).tracking.claim("shard-worker")
    transport = Scripted(httpx.ReadError("lost"), ok(CLAIMED))
    with pytest.raises(ConnectionFailedError):
        client("http://service", "key", transport=transport).tracking.claim("shard-worker")
    assert len(transport.requests) == 1


def test_errors_are_raised_by_status_with_the_body_of_the_error_shape():
    validation = httpx.Response(
        400, json={"code": "validation_error", "message": "The request is invalid.", "details": {"queue": ["Bad."]}}
    )
    transport = Scripted(validation, error(404, "not_found"), httpx.Response(502, text="<html>Bad gateway</html>"))
    jobs = client("http://service", "key", transport=transport).jobs

    with pytest.raises(InvalidRequestError) as invalid:
        jobs.trigger("bad queue", "t", lock_key="k")
    assert (invalid.value.status, invalid.value.details) == (400, {"queue": ["Bad."]})
    with pytest.raises(NotFoundError):
        jobs.status(JOB_ID)
    with pytest.raises(ApiError) as other:  # not the error shape: its status and its text
        jobs.status(JOB_ID)
    assert (other.value.status, other.value.code, other.value.message) == (502, "http_502", "<html>Bad gateway</html>")


def test_a_list_follows_next_by_its_query_on_the_clients_own_base_url():
    # The service names itself as it sees itself (no prefix, another host): only the cursor is taken.
    first = {"next": "http://internal:8000/api/v1/jobs?cursor=c2&limit=1&queue=q", "previous": None, "results": [JOB]}
    last = {"next": None, "previous": "http://internal:8000/api/v1/jobs?cursor=c1", "results": [JOB]}
    transport = Scripted(ok(first), ok(last))

    jobs = list(client("http://proxy/prefix/", "key", transport=transport).jobs.list(queue="q", limit=1))

    assert len(jobs) == 2
    assert [str(request.url) for request in transport.requests] == [
        "http://proxy/prefix/api/v1/jobs?queue=q&limit=1",
        "http://proxy/prefix/api/v1/jobs?cursor=c2&limit=1&queue=q",
    ]


def event(event_id: int, kind: str) -> dict:
    return {"event_id": event_id, "job_id": JOB_ID, "queue": "default", "ts": "2026-01-01T00:00:00Z", "kind": kind}


def test_following_resumes_after_the_last_event_when_a_stream_breaks_or_ends_early():
    def broken_stream():
        yield (json.dumps(event(1, "queued")) + "\n").encode()
        yield (json.dumps(event(2, "picked")) + "\n").encode()
        raise httpx.ReadError("the connection broke")

    def lines(*events: dict) -> httpx.Response:
        return httpx.Response(200, content="".join(json.dumps(item) + "\n" for item in events).encode())

    transport = Scripted(
        httpx.Response(200, content=broken_stream()),
        lines(event(3, "heartbeat")),  # the service's time limit ends it; the job still runs
        ok(JOB),
        lines(event(4, "done")),
        ok({**JOB, "status": "succeeded"}),
    )

    events = list(client("http://service", "key", transport=transport).jobs.follow(JOB_ID))

    assert [(item.event_id, item.kind) for item in events] == [
        (1, "queued"),
        (2, "picked"),
        (3, "heartbeat"),
        (4, "done"),
    ]
    streams = [request for request in transport.requests if request.url.path.endswith("/events")]
    assert [request.url.params["after"] for request in streams] == ["0", "2", "3"]


def test_a_tracking_loop_outlives_the_services_outage():
    done = {"filename": "f", "shard": 0, "stage": "shard-worker", "status": "done"}
    transport = Scripted(
        error(503, "database_unavailable", retry_after="0"),
        httpx.ConnectError("refused"),
        *[httpx.ConnectError("still refused")] * 2,  # every retry of the claim refused too
        ok(CLAIMED),
        ok(done),
        ok({"stage": "shard-worker", "items": []}),
    )
    tracking = client("http://service", "key", transport=transport).tracking

    report = tracking.work("shard-worker", lambda item: None, poll_interval=0.01, stop_when_idle=True)

    assert [(item.filename, item.shard) for item in report.done] == [("f", 0)]
    assert [request.url.path.rsplit("/", 1)[-1] for request in transport.requests][-3:] == ["claim", "done", "claim"]
