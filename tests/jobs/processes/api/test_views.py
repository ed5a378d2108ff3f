"""/api/v1/processes over HTTP (the test client), with a real worker runtime serving the namespaces."""

import threading
import uuid

import pytest
from rest_framework.test import APIClient

from jobs.processes.models import Process, Task
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import scoped_client, staff_client
from tests.jobs.processes.helpers import (
    CYCLES,
    check_process,
    check_trace,
    cycle_through_statuses,
    readers_racing,
    remove_one_after_another,
    serving,
)

pytestmark = ALL_DATABASES_COMMITTED
BASE = "/api/v1/processes/test.scripted"


def new_id() -> str:
    return f"p-{uuid.uuid4().hex[:12]}"


def test_init_call_get_and_trace(api):
    pid = new_id()
    with serving():
        started = api.post(f"{BASE}/{pid}/init", {"args": {"events": ["a"], "response": {"hello": 1}}}, format="json")
        called = api.post(f"{BASE}/{pid}/call", {"args": {"events": ["b"]}}, format="json")
        again = api.post(f"{BASE}/{pid}/init", {}, format="json")

    assert (started.status_code, started.json()) == (200, {"response": {"hello": 1}})
    assert (called.status_code, called.json()) == (200, {"response": "ok"})
    assert again.status_code == 409 and again.json()["message"] == "process already exists"
    got = api.get(f"{BASE}/{pid}", {"offset": 1, "limit": 5})
    assert got.status_code == 200
    body = got.json()
    assert (body["status"], body["last_event_id"], [e["payload"] for e in body["history"]]) == ("running", 2, ["b"])
    trace = api.get(f"{BASE}/{pid}/trace").json()["tasks"]
    assert [(t["task_type"], t["status"]) for t in trace] == [("init", "finished"), ("call", "finished")]
    health = api.get(f"{BASE}/health").json()
    assert health["processes"]["running"] >= 1 and health["status"] == "ok"


def test_errors_are_in_the_error_shape_with_progressors_messages(api):
    pid = new_id()
    with serving():
        assert api.post(f"{BASE}/{pid}/init", {}, format="json").status_code == 200
        failed = api.post(f"{BASE}/{pid}/call", {"args": {"error": "boom"}}, format="json")
        in_error = api.post(f"{BASE}/{pid}/call", {}, format="json")
        slow = api.post(f"/api/v1/processes/test.quick/{new_id()}/init", {"args": {"sleep": 1.5}}, format="json")

    assert failed.status_code == 422 and failed.json()["details"]["reason"] == {"error": "boom"}
    assert (in_error.status_code, in_error.json()["message"]) == (409, "process is error")
    assert (slow.status_code, slow.json()["code"]) == (504, "timeout")
    assert api.post(f"/api/v1/processes/nope/{pid}/call", {}, format="json").json()["message"] == "namespace not found"
    assert api.post(f"{BASE}/{new_id()}/call", {}, format="json").json()["message"] == "process not found"
    assert api.get(f"{BASE}/{pid}", {"direction": "sideways"}).status_code == 400
    assert api.post(f"{BASE}/{pid}/call", {"argz": 1}, format="json").status_code == 400


@pytest.mark.parametrize("path", ["health", "p/trace", "p"])
def test_reads_need_a_token(anonymous, path):
    assert anonymous.get(f"{BASE}/{path}").status_code == 401


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "p/call", {"argz": 1}),
        ("post", "p/init", "not an object"),
        ("put", "p", {"process": {"status": "nope"}}),
        ("get", "p?direction=sideways", None),
        ("delete", "p", None),
    ],
)
def test_the_token_is_checked_before_the_request_is_read(anonymous, method, path, body):
    answer = getattr(anonymous, method)(f"{BASE}/{path}", body, format="json")

    assert (answer.status_code, answer.json()["code"]) == (401, "not_authenticated")
    assert not Process.objects.filter(process_id="p").exists()


def test_put_imports_a_process(api):
    pid = new_id()
    body = {"process": {"status": "error", "detail": "elsewhere", "history": [{"event_id": 3, "payload": "x"}]}}

    created = api.put(f"{BASE}/{pid}", body, format="json")
    again = api.put(f"{BASE}/{pid}", body, format="json")
    bad = api.put(f"{BASE}/{new_id()}", {"process": {"status": "nope"}}, format="json")

    assert created.status_code == 201 and again.status_code == 409 and bad.status_code == 400
    got = api.get(f"{BASE}/{pid}").json()
    assert (got["status"], got["detail"], got["last_event_id"]) == ("error", "elsewhere", 3)


def client_with(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


def test_get_and_trace_over_http_during_state_changes_answer_one_state(api, api_token):
    pid = new_id()
    clients = threading.local()

    def read():
        if not hasattr(clients, "client"):
            clients.client = client_with(api_token)
        return clients.client.get(f"{BASE}/{pid}"), clients.client.get(f"{BASE}/{pid}/trace")

    with serving():
        api.post(f"{BASE}/{pid}/init", {}, format="json")
        answers = readers_racing(cycle_through_statuses(pid), read)

    assert len(answers) > CYCLES
    for got, trace in answers:
        assert (got.status_code, trace.status_code) == (200, 200), (got.content, trace.content)
        check_process(got.json())
        check_trace(trace.json()["tasks"])


def test_get_and_trace_over_http_during_removal_answer_200_or_404(api_token):
    current = [new_id()]
    clients = threading.local()

    def read():
        if not hasattr(clients, "client"):
            clients.client = client_with(api_token)
        pid = current[0]
        return clients.client.get(f"{BASE}/{pid}"), clients.client.get(f"{BASE}/{pid}/trace")

    with serving():
        answers = readers_racing(remove_one_after_another(current), read)

    statuses = {response.status_code for pair in answers for response in pair}
    assert statuses == {200, 404}, [r.content for pair in answers for r in pair if r.status_code not in (200, 404)][:3]
    for got, _trace in answers:
        if got.status_code == 200:
            check_process(got.json())
        else:
            assert got.json()["message"] in ("process not found",)


# --- strict request bodies: refused before any service runs, in the error shape --------------

BAD_RANGES = [
    "forward",
    [],
    {"offset": -1},
    {"offset": 2**31},
    {"limit": 10**30},
    {"offset": "1"},
    {"limit": 1.5},
    {"offset": True},
    {"limit": None},
    {"direction": "sideways"},
    {"direction": 1},
    {"bogus": 1},
]
BAD_TASK_BODIES = [
    [],
    "args",
    7,
    {"argz": 1},
    {"idempotency_key": 123},
    {"idempotency_key": ""},
    {"idempotency_key": "k" * 1025},
    {"idempotency_key": "\U0001f600" * 600},  # 600 characters, 2,400 bytes: more than its index holds
    {"idempotency_key": ["k"]},
    *({"range": bad} for bad in BAD_RANGES),
]


def assert_refused(response, status=400):
    assert response.status_code == status, response.content
    assert set(response.json()) == {"code", "message", "details"}


@pytest.mark.parametrize("body", BAD_TASK_BODIES)
@pytest.mark.parametrize("task", ["init", "call", "repair"])
def test_a_malformed_task_body_is_refused_and_nothing_is_written(api, task, body):
    assert_refused(api.post(f"{BASE}/{new_id()}/{task}", body, format="json"))
    assert not Task.objects.exists() and not Process.objects.exists()


@pytest.mark.parametrize("body", [[], {"context": 1, "bogus": 2}, {"contxt": {}}])
def test_a_malformed_simple_repair_body_is_refused(api, body):
    assert_refused(api.post(f"{BASE}/{new_id()}/simple_repair", body, format="json"))


@pytest.mark.parametrize(
    "body",
    [
        {},
        [],
        {"process": "x"},
        {"process": {}, "extra": 1},
        {"process": {"bogus": 1}},
        {"process": {"status": 1}},
        {"process": {"status": "done"}},
        {"process": {"detail": 5}},
        {"process": {"process_id": "x" * 300}},
        {"process": {"history": "x"}},
        {"process": {"history": [{"event_id": "1"}]}},
        {"process": {"history": [{"event_id": 0}]}},
        {"process": {"history": [{"event_id": 2**31}]}},
        {"process": {"history": [{"event_id": 1, "bogus": 1}]}},
        {"process": {"history": [{"payload": 1}]}},
        {"process": {"history": [{"event_id": 1}, {"event_id": 1}]}},
        {"process": {"history": [{"event_id": 1, "timestamp": 1e300}]}},
        {"process": {}, "action": "explode"},
        {"process": {}, "action": {"set_timer": "tomorrow"}},
        {"process": {}, "action": {"set_timer": 1e300}},
        {"process": {}, "action": {"set_timer": "2026-02-30T00:00:00+00:00"}},
        {"process": {}, "action": {"set_timer": True}},
        {"process": {}, "action": {"set_timer": 1, "remove": "yes"}},
        {"process": {}, "action": {"set_timer": 1, "bogus": 1}},
        {"process": {}, "action": {"remove": True}},
    ],
)
def test_a_malformed_put_body_is_refused_and_nothing_is_written(api, body):
    assert_refused(api.put(f"{BASE}/{new_id()}", body, format="json"))
    assert not Process.objects.exists()


@pytest.mark.parametrize(
    "query",
    [
        {"offset": "-1"},
        {"offset": "abc"},
        {"offset": "1.5"},
        {"offset": "99999999999"},
        {"limit": "2147483648"},
        {"limit": "１"},
        {"direction": "up"},
        {"bogus": "1"},
    ],
)
def test_a_malformed_range_query_is_refused(api, query):
    assert_refused(api.get(f"{BASE}/{new_id()}", query))


@pytest.mark.parametrize("path", ["p/trace", "health"])
def test_routes_without_parameters_refuse_any(api, path):
    assert_refused(api.get(f"{BASE}/{path}", {"bogus": "1"}))


@pytest.mark.parametrize(
    ("method", "suffix"), [("post", "/init"), ("post", "/call"), ("put", ""), ("post", "/simple_repair")]
)
def test_writes_take_no_query_parameters(api, method, suffix):
    pid = new_id()
    body = {"process": {"status": "running"}} if method == "put" else {}

    answer = getattr(api, method)(f"{BASE}/{pid}{suffix}?wait=1", body, format="json")

    assert_refused(answer)
    assert answer.json()["details"] == {"wait": ["Unknown field."]}
    assert not Process.objects.filter(process_id=pid).exists()


@pytest.mark.parametrize(
    ("method", "suffix"), [("get", ""), ("get", "/trace"), ("post", "/call"), ("post", "/init"), ("put", "")]
)
def test_a_process_id_with_a_nul_or_too_long_is_refused_not_a_crash(api, method, suffix):
    for process_id in ("a%00b", "x" * 300):
        body = {"process": {}} if method == "put" else {}
        assert_refused(getattr(api, method)(f"{BASE}/{process_id}{suffix}", body, format="json"))


def test_a_call_over_http_with_a_range_and_a_context(api):
    pid = new_id()
    with serving():
        api.post(f"{BASE}/{pid}/init", {"args": {"events": [1, 2, 3, 4]}}, format="json")
        called = api.post(
            f"{BASE}/{pid}/call",
            {
                "args": {"observe": True},
                "range": {"direction": "backward", "offset": 4, "limit": 2},
                "context": {"trace_id": "t-1"},
            },
            format="json",
        )

    assert called.status_code == 200, called.content
    assert called.json()["response"] == {
        "task_type": "call",
        "history": [3, 2],
        "range": {"direction": "backward", "offset": 4, "limit": 2},
        "context": {"trace_id": "t-1"},
    }


def test_an_idempotency_key_is_taken_as_sent(api):
    pid = new_id()
    with serving():
        api.post(f"{BASE}/{pid}/init", {"idempotency_key": f" {pid} "}, format="json")
        api.post(f"{BASE}/{pid}/call", {"idempotency_key": f"{pid}", "args": {"events": ["x"]}}, format="json")

    assert sorted(Task.objects.filter(process__process_id=pid).values_list("idempotency_key", flat=True)) == [
        f" {pid} ",
        pid,
    ]


def test_the_trace_masks_secret_task_args_unless_the_caller_may_view_arguments(api):
    pid = new_id()
    with serving():
        assert api.post(f"{BASE}/{pid}/init", {"args": {"events": ["a"]}}, format="json").status_code == 200
    Task.objects.filter(process__process_id=pid).update(args={"events": ["a"], "conn": {"access-key": "k1"}})

    def traced(client) -> list:
        return [task["args"] for task in client.get(f"{BASE}/{pid}/trace").json()["tasks"]]

    masked, shown = [{"events": ["a"], "conn": {"access-key": MASK}}], [{"events": ["a"], "conn": {"access-key": "k1"}}]
    assert traced(scoped_client("read")) == traced(staff_client("processes.view_process")) == masked
    assert traced(api) == traced(staff_client("processes.view_process", "jobs.view_job_arguments")) == shown


def test_a_daemon_token_of_the_default_scopes_repairs_a_process_in_error():
    """repair and simple_repair are seed 001's client API: a token made with the default scopes
    (read, write) makes them, as it makes init and call."""
    daemon = scoped_client("read", "write")
    repaired, simply_repaired = new_id(), new_id()
    with serving():
        for pid in (repaired, simply_repaired):
            assert daemon.post(f"{BASE}/{pid}/init", {}, format="json").status_code == 200
            assert daemon.post(f"{BASE}/{pid}/call", {"args": {"error": "boom"}}, format="json").status_code == 422
        repair = daemon.post(f"{BASE}/{repaired}/repair", {}, format="json")
    simple = daemon.post(f"{BASE}/{simply_repaired}/simple_repair", {"context": {}}, format="json")

    assert (repair.status_code, repair.json()) == (200, {"response": {"repaired": True}})
    assert (simple.status_code, simple.json()) == (200, {"response": "ok"})
    statuses = dict(
        Process.objects.filter(process_id__in=[repaired, simply_repaired]).values_list("process_id", "status")
    )
    assert statuses == {repaired: "running", simply_repaired: "running"}
