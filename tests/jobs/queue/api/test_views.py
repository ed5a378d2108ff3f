"""The jobs API: seed 002 trigger/status/cancel, the bulk trigger, list, NDJSON events, delete."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.queue import services
from jobs.queue.api import serializers as s
from jobs.queue.api.filters import JobFilter
from jobs.queue.api.views import JobPagination
from jobs.queue.models import Job, JobEvent
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import run_in_threads
from tests.helpers import scoped_client, staff_client
from tests.jobs.conftest import enqueue, job

BASE = "/api/v1/jobs"
VALID = {"queue": "load.cbr", "task": "load.rates", "lock_key": "cbr-2025-01-01"}


def trigger(api, body, path="/trigger"):
    return api.post(f"{BASE}{path}", body, format="json")


def claim_all(queue="default"):
    return services.jobs_claim(queue=queue, limit=100, worker_id="w")


# --- trigger ------------------------------------------------------------------------------


@ALL_DATABASES
def test_trigger_creates_a_job(api):
    response = trigger(api, {**VALID, "args": {"date": "2025-01-01"}, "priority": 5, "partition_key": "cbr"})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"job_id", "status", "created"}
    assert body["status"] == "queued" and body["created"] is True
    row = job(body["job_id"])
    assert (row.queue, row.task, row.args, row.priority, row.partition_key) == (
        "load.cbr",
        "load.rates",
        {"date": "2025-01-01"},
        5,
        "cbr",
    )
    assert row.producer == "test-daemon"  # the token's name unless the body names one
    assert row.lease_ttl_sec == 60 and row.max_attempts == 5


@ALL_DATABASES
def test_trigger_with_an_idempotency_key_returns_the_same_job(api):
    first = trigger(api, {**VALID, "idempotency_key": "cbr-2025-01-01"})
    again = trigger(api, {**VALID, "idempotency_key": "cbr-2025-01-01"})

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == {**first.json(), "created": False}
    assert Job.objects.count() == 1


@ALL_DATABASES
def test_trigger_reusing_a_key_for_another_job_is_409(api):
    trigger(api, {**VALID, "idempotency_key": "k"})

    response = trigger(api, {**VALID, "idempotency_key": "k", "args": {"other": True}})

    assert response.status_code == 409
    assert response.json()["code"] == "idempotency_conflict"
    assert response.json()["details"]["differs"] == ["args"]
    assert Job.objects.count() == 1


@ALL_DATABASES
def test_trigger_with_available_at_defers_the_job(api):
    later = timezone.now() + timedelta(hours=2)

    body = trigger(api, {**VALID, "available_at": later.isoformat()}).json()

    assert abs((job(body["job_id"]).available_at - later).total_seconds()) < 0.001


@ALL_DATABASES_COMMITTED
def test_fifty_concurrent_triggers_with_one_key_make_one_job(api_token):
    def call(_index):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token}")
        response = client.post(f"{BASE}/trigger", {**VALID, "idempotency_key": "once"}, format="json")
        return response.status_code, response.json()["job_id"]

    results = run_in_threads(50, call)

    assert sorted({status for status, _ in results}) in ([200, 201], [201])
    assert [status for status, _ in results].count(201) == 1
    assert len({job_id for _, job_id in results}) == 1
    assert Job.objects.count() == 1


BAD_TRIGGERS = [
    ("not json", "{nope"),
    ("array", "[]"),
    ("missing lock_key", {"queue": "q", "task": "t"}),
    ("missing queue", {"task": "t", "lock_key": "k"}),
    ("number as queue", {"queue": 5, "task": "t", "lock_key": "k"}),
    ("bad queue name", {"queue": "a queue", "task": "t", "lock_key": "k"}),
    ("empty task", {"queue": "q", "task": "", "lock_key": "k"}),
    ("args not an object", {**VALID, "args": [1, 2]}),
    ("string priority", {**VALID, "priority": "1"}),
    ("negative priority", {**VALID, "priority": -1}),
    ("huge priority", {**VALID, "priority": 2**31}),
    ("negative max_attempts", {**VALID, "max_attempts": -1}),
    ("zero lease", {**VALID, "lease_ttl_sec": 0}),
    ("lease too short to renew in time", {**VALID, "lease_ttl_sec": 2}),
    ("bad available_at", {**VALID, "available_at": "tomorrow"}),
    ("empty idempotency key", {**VALID, "idempotency_key": ""}),
    ("NUL in args", '{"queue": "q", "task": "t", "lock_key": "k", "args": {"x": "a\\u0000b"}}'),
    ("NUL in a key", '{"queue": "q", "task": "t", "lock_key": "k", "args": {"a\\u0000": 1}}'),
    ("lone surrogate", '{"queue": "q", "task": "t", "lock_key": "k\\udc00"}'),
    ("too deep", '{"queue": "q", "task": "t", "lock_key": "k", "args": ' + '{"a": ' * 80 + "1" + "}" * 80 + "}"),
    ("long lock_key", {**VALID, "lock_key": "x" * 1025}),
    # 1,000 characters but 4,000 bytes: too large for the running-lock_key index.
    ("lock_key long in bytes", {**VALID, "lock_key": "\U00010000" * 1000}),
    ("idempotency key long in bytes", {**VALID, "idempotency_key": "é" * 513}),
    ("queue long in bytes", {**VALID, "queue": "q" * 201}),
    ("NUL in partition_key", {**VALID, "partition_key": "a\x00b"}),
]


@ALL_DATABASES
@pytest.mark.parametrize(("case", "body"), BAD_TRIGGERS, ids=[case for case, _ in BAD_TRIGGERS])
def test_bad_triggers_are_400_and_write_nothing(api, case, body):
    if isinstance(body, str):
        response = api.post(f"{BASE}/trigger", body, content_type="application/json")
    else:
        response = trigger(api, body)

    assert response.status_code == 400, response.content
    assert set(response.json()) == {"code", "message", "details"}
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0


# --- bulk ---------------------------------------------------------------------------------


@ALL_DATABASES
def test_bulk_trigger_creates_all_jobs_in_order(api):
    body = {"jobs": [{**VALID, "lock_key": f"k{i}", "args": {"i": i}} for i in range(5)]}

    response = trigger(api, body, "/trigger/bulk")

    assert response.status_code == 201
    created = response.json()["jobs"]
    assert [job(item["job_id"]).args["i"] for item in created] == [0, 1, 2, 3, 4]
    assert all(item["created"] for item in created)


@ALL_DATABASES
def test_bulk_trigger_is_idempotent_per_item(api):
    trigger(api, {**VALID, "idempotency_key": "old"})

    response = trigger(
        api, {"jobs": [{**VALID, "idempotency_key": "old"}, {**VALID, "idempotency_key": "new"}]}, "/trigger/bulk"
    )

    assert [item["created"] for item in response.json()["jobs"]] == [False, True]
    assert Job.objects.count() == 2


@ALL_DATABASES
@pytest.mark.parametrize(
    "body",
    [{"jobs": []}, {"jobs": "x"}, {"jobs": [VALID, {"queue": "q"}]}, {"jobs": [VALID] * 1001}, {}],
)
def test_bulk_trigger_validation_is_all_or_nothing(api, body):
    response = trigger(api, body, "/trigger/bulk")

    assert response.status_code == 400
    assert Job.objects.count() == 0


@ALL_DATABASES
def test_bulk_trigger_conflict_writes_nothing(api):
    trigger(api, {**VALID, "idempotency_key": "k"})

    response = trigger(
        api,
        {"jobs": [{**VALID, "lock_key": "fresh"}, {**VALID, "idempotency_key": "k", "task": "other"}]},
        "/trigger/bulk",
    )

    assert response.status_code == 409
    assert Job.objects.count() == 1


# --- status and cancel --------------------------------------------------------------------


@ALL_DATABASES
def test_status_has_the_seed_fields(api):
    enqueued = enqueue(task="t")

    response = api.get(f"{BASE}/{enqueued.job_id}/status")

    assert response.status_code == 200
    body = response.json()
    for name in ["job_id", "status", "attempt", "started_at", "finished_at", "heartbeat_at", "error", "progress"]:
        assert name in body
    assert (body["status"], body["attempt"], body["progress"], body["error"]) == ("queued", 0, {}, None)


@ALL_DATABASES
def test_unknown_and_malformed_job_ids_are_404(api):
    assert api.get(f"{BASE}/{uuid.uuid4()}/status").json()["code"] == "not_found"
    assert api.get(f"{BASE}/not-a-uuid/status").status_code == 404
    assert api.post(f"{BASE}/{uuid.uuid4()}/cancel").status_code == 404


@ALL_DATABASES
def test_trigger_status_cancel(api):
    job_id = trigger(api, VALID).json()["job_id"]
    assert api.get(f"{BASE}/{job_id}/status").json()["status"] == "queued"

    response = api.post(f"{BASE}/{job_id}/cancel")

    assert response.status_code == 200
    assert response.json()["status"] == "canceled"
    assert api.get(f"{BASE}/{job_id}/status").json()["status"] == "canceled"
    assert api.post(f"{BASE}/{job_id}/cancel").status_code == 200  # a repeat is harmless


@ALL_DATABASES
def test_cancel_of_a_running_job_requests_it(api):
    enqueued = enqueue(task="t")
    claim_all()

    body = api.post(f"{BASE}/{enqueued.job_id}/cancel").json()

    assert (body["status"], body["cancel_requested"]) == ("running", True)


@ALL_DATABASES
def test_cancel_of_a_finished_job_is_409_with_its_status(api):
    enqueued = enqueue(task="t")
    Job.objects.filter(job_id=enqueued.job_id).update(status="succeeded")

    response = api.post(f"{BASE}/{enqueued.job_id}/cancel")

    assert response.status_code == 409
    assert response.json()["details"]["status"] == "succeeded"


# --- list ---------------------------------------------------------------------------------


@ALL_DATABASES
def test_list_is_newest_first_filtered_and_paginated(api):
    ids = [
        enqueue(task="a" if i % 2 else "b", queue="q1" if i < 4 else "q2", lock_key=f"lk{i}").job_id for i in range(6)
    ]
    Job.objects.filter(job_id=ids[0]).update(status="failed")

    everything = api.get(BASE).json()
    assert [item["job_id"] for item in everything["results"]] == [str(i) for i in reversed(ids)]

    def listed(**query):
        return [item["job_id"] for item in api.get(BASE, query).json()["results"]]

    assert listed(queue="q2") == [str(ids[5]), str(ids[4])]
    assert listed(task="a", queue="q1") == [str(ids[3]), str(ids[1])]
    assert listed(status="failed") == [str(ids[0])]
    assert listed(lock_key="lk2") == [str(ids[2])]

    page = api.get(BASE, {"limit": 4}).json()
    assert len(page["results"]) == 4 and page["next"]
    rest = api.get(page["next"]).json()
    assert [item["job_id"] for item in rest["results"]] == [str(ids[1]), str(ids[0])]


@ALL_DATABASES
def test_list_created_range(api):
    old = enqueue(task="t").job_id
    Job.objects.filter(job_id=old).update(created_at=timezone.now() - timedelta(days=3))
    new = enqueue(task="t").job_id
    since = (timezone.now() - timedelta(days=1)).isoformat()

    assert [item["job_id"] for item in api.get(BASE, {"created_after": since}).json()["results"]] == [str(new)]
    assert [item["job_id"] for item in api.get(BASE, {"created_before": since}).json()["results"]] == [str(old)]


@ALL_DATABASES
@pytest.mark.parametrize(
    "query", [{"status": "bogus"}, {"created_after": "yesterday"}, {"limit": "x"}, {"cursor": "garbage"}]
)
def test_list_rejects_bad_filters(api, query):
    response = api.get(BASE, query)

    assert 400 <= response.status_code < 500
    assert set(response.json()) == {"code", "message", "details"}


@ALL_DATABASES
def test_list_refuses_a_parameter_it_does_not_take(api):
    response = api.get(BASE, {"staus": "failed", "queue": "default"})

    assert response.status_code == 400
    assert response.json()["details"] == {"staus": ["Unknown field."]}


def test_the_list_query_takes_every_filter_and_the_paginators_parameters():
    assert set(s.JobListQuery().fields) == set(JobFilter.base_filters) | {
        JobPagination.cursor_query_param,
        JobPagination.page_size_query_param,
    }


@ALL_DATABASES
def test_list_takes_every_filter_with_a_cursor(api):
    enqueue(task="t")
    enqueue(task="t")
    first = api.get(BASE, {"task": "t", "status": ["queued", "running"], "limit": 1}).json()

    second = api.get(first["next"]).json()

    assert [len(first["results"]), len(second["results"])] == [1, 1]


# --- delete -------------------------------------------------------------------------------


@ALL_DATABASES
def test_delete_dry_run_then_delete(api):
    enqueued = enqueue(task="t")

    preview = api.delete(f"{BASE}/{enqueued.job_id}?dry_run=true").json()
    assert preview == {
        "job_id": str(enqueued.job_id),
        "status": "queued",
        "events": 1,
        "deleted": False,
        "dry_run": True,
    }
    assert Job.objects.count() == 1

    assert api.delete(f"{BASE}/{enqueued.job_id}").json()["deleted"] is True
    assert Job.objects.count() == JobEvent.objects.count() == 0
    assert api.delete(f"{BASE}/{enqueued.job_id}").status_code == 404


@ALL_DATABASES
def test_delete_of_a_running_job_needs_force(api):
    enqueued = enqueue(task="t")
    claim_all()

    refused = api.delete(f"{BASE}/{enqueued.job_id}")
    assert refused.status_code == 409 and refused.json()["code"] == "job_running"
    assert Job.objects.count() == 1

    assert api.delete(f"{BASE}/{enqueued.job_id}?force=true").json()["deleted"] is True
    assert Job.objects.count() == 0


# --- auth ---------------------------------------------------------------------------------


@ALL_DATABASES
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("post", "/trigger"),
        ("post", "/trigger/bulk"),
        ("get", ""),
        ("get", "/{id}/status"),
        ("post", "/{id}/cancel"),
        ("get", "/{id}/events?follow=false"),
        ("delete", "/{id}"),
    ],
)
def test_every_jobs_endpoint_requires_a_token(anonymous, method, path):
    enqueued = enqueue(task="t")

    response = getattr(anonymous, method)(BASE + path.format(id=enqueued.job_id), VALID, format="json")

    assert response.status_code == 401
    assert Job.objects.count() == 1 and job(enqueued.job_id).status == "queued"


# --- operators' controls -------------------------------------------------------------------


@ALL_DATABASES
def test_retry_every_job_the_filters_match_after_a_preview(api):
    for status in ("failed", "failed", "succeeded"):
        Job.objects.filter(job_id=enqueue(task="t", queue="reports", args={"run": 3}).job_id).update(status=status)
    Job.objects.filter(job_id=enqueue(task="t", queue="reports", args={"run": 4}).job_id).update(status="failed")

    preview = api.post(f"{BASE}/retry", {"filters": {"args": '{"run": 3}'}, "dry_run": True}, format="json")
    done = api.post(f"{BASE}/retry", {"filters": {"queue": "reports", "args": '{"run": 3}'}}, format="json")

    assert preview.json() == {"matched": 3, "changed": 2, "requested": 0, "skipped": 1, "dry_run": True}
    assert done.json() == {"matched": 3, "changed": 2, "requested": 0, "skipped": 1, "dry_run": False}
    assert Job.objects.filter(status="failed").count() == 1  # run 4's


@ALL_DATABASES
@pytest.mark.parametrize(
    "body",
    [
        {},
        {"filters": {}},
        {"filters": {"status": ["bogus"]}},
        {"filters": {"args": "[1, 2]"}},
        {"filters": {"args": "{nope"}},
        {"filters": {"created_after": "yesterday"}},
        {"filters": {"queue": "q"}, "dry_run": "yes"},
        {"filters": {"queue": "q"}, "extra": 1},
    ],
)
def test_bulk_actions_refuse_missing_or_bad_filters(api, body):
    enqueue(task="t", queue="q")

    for action in ("retry", "cancel", "delete"):
        response = api.post(f"{BASE}/{action}", body, format="json")
        assert response.status_code == 400, (action, response.content)
    assert Job.objects.get().status == "queued"


@ALL_DATABASES
def test_cancel_and_delete_every_matching_job(api):
    queued = [enqueue(task="t", queue="q", lock_key=f"k{i}") for i in range(3)]
    other = enqueue(task="t", queue="other")

    canceled = api.post(f"{BASE}/cancel", {"filters": {"queue": "q"}}, format="json").json()
    deleted = api.post(f"{BASE}/delete", {"filters": {"status": ["canceled"]}}, format="json").json()

    assert (canceled["matched"], canceled["changed"]) == (3, 3)
    assert (deleted["matched"], deleted["changed"]) == (3, 3)
    assert not Job.objects.filter(job_id__in=[item.job_id for item in queued]).exists()
    assert Job.objects.get().job_id == other.job_id


@ALL_DATABASES
def test_list_filters_by_args_containment_and_error_text(api):
    wanted = enqueue(task="t", args={"source_id": 7, "page": 2})
    enqueue(task="t", args={"source_id": 8})
    Job.objects.filter(job_id=wanted.job_id).update(error="TimeoutError: the source took too long")

    by_args = api.get(BASE, {"args": '{"source_id": 7}'}).json()["results"]
    by_error = api.get(BASE, {"error": "took too LONG"}).json()["results"]

    assert [item["job_id"] for item in by_args] == [str(wanted.job_id)]
    assert [item["job_id"] for item in by_error] == [str(wanted.job_id)]
    assert api.get(BASE, {"args": "not json"}).status_code == 400


@ALL_DATABASES
def test_queues_pause_resume_and_list_through_the_api(api):
    enqueue(task="t", queue="load/cbr")

    paused = api.post("/api/v1/queues/load/cbr/pause")
    again = api.post("/api/v1/queues/load/cbr/pause")
    listed = api.get("/api/v1/queues").json()
    resumed = api.post("/api/v1/queues/load/cbr/resume")

    assert paused.json() == {"queue": "load/cbr", "paused": True, "changed": True}
    assert again.json()["changed"] is False
    assert [(q["name"], q["paused"], q["depth"]) for q in listed] == [("load/cbr", True, {"queued": 1})]
    assert resumed.json() == {"queue": "load/cbr", "paused": False, "changed": True}
    assert api.post("/api/v1/queues/not a queue/pause").status_code == 400


@ALL_DATABASES
def test_queue_limits_through_the_api(api):
    enqueue(task="t", queue="load/cbr")

    set_ = api.put(
        "/api/v1/queues/load/cbr/limits",
        {"max_running": 3, "rate_limit": 10, "rate_period_sec": 60, "per_partition": True},
        format="json",
    )
    listed = api.get("/api/v1/queues").json()[0]
    cleared = api.put("/api/v1/queues/load/cbr/limits", {}, format="json")

    assert set_.status_code == 200
    assert set_.json() == {
        "queue": "load/cbr",
        "max_running": 3,
        "rate_limit": 10,
        "rate_period_sec": 60,
        "per_partition": True,
    }
    assert (listed["max_running"], listed["rate_limit"], listed["started_in_period"]) == (3, 10, 0)
    assert cleared.json()["max_running"] is None and api.get("/api/v1/queues").json()[0]["started_in_period"] is None


@ALL_DATABASES
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": "3"}, "max_running"),
        ({"rate_limit": 5}, "rate_period_sec"),
        ({"rate_period_sec": 5}, "rate_limit"),
        ({"rate_limit": 5, "rate_period_sec": 0}, "rate_period_sec"),
        ({"max_runing": 3}, "max_runing"),
    ],
)
def test_queue_limits_refuses_bad_values_naming_the_field(api, body, field):
    response = api.put("/api/v1/queues/q/limits", body, format="json")
    assert response.status_code == 400
    assert field in response.json()["details"]


# --- arguments' secrets --------------------------------------------------------------------

SECRET_ARGS = {"source_id": 7, "db": {"DB_PASSWORD": "hunter2"}, "targets": [{"api_key": 12345}]}
MASKED_ARGS = {"source_id": 7, "db": {"DB_PASSWORD": MASK}, "targets": [{"api_key": MASK}]}
JOBS_READ = ("jobs.view_job",)


def args_answered(client, job_id) -> list:
    """The job's args in every answer that carries them: detail, status, list."""
    detail = client.get(f"{BASE}/{job_id}")
    status = client.get(f"{BASE}/{job_id}/status")
    listed = client.get(BASE)
    assert (detail.status_code, status.status_code, listed.status_code) == (200, 200, 200), detail.content
    return [detail.json()["args"], status.json()["args"], *(item["args"] for item in listed.json()["results"])]


@ALL_DATABASES
@pytest.mark.parametrize(
    ("who", "shown"),
    [
        ("read token", MASKED_ARGS),
        ("read and operate token", MASKED_ARGS),
        ("write token", SECRET_ARGS),
        ("staff", MASKED_ARGS),
        ("staff who may view arguments", SECRET_ARGS),
        ("superuser", SECRET_ARGS),
    ],
)
def test_secret_args_are_masked_unless_the_caller_may_view_them(who, shown, admin_user):
    clients = {
        "read token": lambda: scoped_client("read"),
        "read and operate token": lambda: scoped_client("read", "operate"),
        "write token": lambda: scoped_client("read", "write"),
        "staff": lambda: staff_client(*JOBS_READ),
        "staff who may view arguments": lambda: staff_client(*JOBS_READ, "jobs.view_job_arguments"),
        "superuser": lambda: _logged_in(admin_user),
    }
    queued = enqueue(task="t", args=SECRET_ARGS)

    assert args_answered(clients[who](), queued.job_id) == [shown, shown, shown]
    assert job(queued.job_id).args == SECRET_ARGS  # masked in answers only


def _logged_in(user) -> APIClient:
    client = APIClient()
    client.force_login(user)
    return client


@ALL_DATABASES
def test_a_cancel_by_an_operator_token_answers_the_job_with_its_args_masked():
    queued = enqueue(task="t", args=SECRET_ARGS)

    canceled = scoped_client("read", "operate").post(f"{BASE}/{queued.job_id}/cancel")

    assert canceled.status_code == 200 and canceled.json()["args"] == MASKED_ARGS


@ALL_DATABASES
@pytest.mark.parametrize("query", ['{"db": {"DB_PASSWORD": "hunter2"}}', '{"targets": [{"api_key": 12345}]}'])
def test_the_args_filter_naming_a_secret_key_is_refused_unless_the_caller_may_view_arguments(query):
    wanted = enqueue(task="t", args=SECRET_ARGS)

    refused = scoped_client("read").get(BASE, {"args": query})
    staff_refused = staff_client(*JOBS_READ).get(BASE, {"args": query})
    found = scoped_client("read", "write").get(BASE, {"args": query})
    staff_found = staff_client(*JOBS_READ, "jobs.view_job_arguments").get(BASE, {"args": query})
    other_keys = scoped_client("read").get(BASE, {"args": '{"source_id": 7}'})

    assert (refused.status_code, staff_refused.status_code) == (400, 400)
    assert refused.json()["code"] == "validation_error" and "args" in refused.json()["details"]
    assert "secret key" in refused.json()["message"]
    for variant in ('{"db_password": "x"}', '{"a": [{"b": {"Api-Key": 1}}]}'):  # any case, any depth
        assert scoped_client("read").get(BASE, {"args": variant}).status_code == 400
    for answer in (found, staff_found, other_keys):
        assert [item["job_id"] for item in answer.json()["results"]] == [str(wanted.job_id)]


@ALL_DATABASES
def test_a_bulk_action_filtering_by_a_secret_key_is_refused_to_an_operator_token():
    Job.objects.filter(job_id=enqueue(task="t", args=SECRET_ARGS).job_id).update(status="failed")
    body = {"filters": {"args": '{"db": {"DB_PASSWORD": "hunter2"}}'}, "dry_run": True}

    refused = scoped_client("read", "operate").post(f"{BASE}/retry", body, format="json")
    counted = scoped_client("read", "write", "operate").post(f"{BASE}/retry", body, format="json")

    assert refused.status_code == 400 and "args" in refused.json()["details"]
    assert counted.status_code == 200 and counted.json()["matched"] == 1
