"""The service as the image starts it (docker-entrypoint.sh's web and worker roles: gunicorn, the
project's uvicorn worker, uvloop, its ASGI handler), as root and as an unprivileged user: every
route that streams, starts a program or waits on the event loop answers through it. The suite's
other tests call the application in-process; these call what ships."""

import json
import time

import httpx
import pytest
from django.contrib.auth import get_user_model

from ingestion import services as ingestion
from jobs.queue.models import Worker
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.e2e.servers import account, shipped
from tests.e2e.test_deployed_service import log_in
from tests.helpers import every_scope_token, wait_for
from tests.ingestion.helpers import source_of
from tests.ingestion.site import serving

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]

PROCESSORS = {"PROCESSES_HANDLER_MODULES": "tests.jobs.processes.processors"}


@pytest.fixture(params=["root", "unprivileged"])
def run_as(request):
    return account(request.param)


def client(service, token: str | None = None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.Client(base_url=service.url, headers=headers, timeout=60)


def worker_ready(service, *, namespaces: bool = False) -> None:
    """Wait until the worker serves: its queues once it has registered, or its process namespaces
    once it logs so (at INFO; a worker of namespaces only registers no queues). A call made before
    would spend its step timeout on the worker's start."""

    def serving() -> bool:
        if namespaces:
            return "serving process namespaces" in service.logged()
        return Worker.objects.filter(pid=service.worker.pid).exists()

    wait_for(lambda: service.worker.poll() is not None or serving(), timeout=60, what="the worker to serve")
    assert service.worker.poll() is None, service.logged()


def lines(http: httpx.Client, method: str, path: str, **kwargs) -> list[tuple[float, dict]]:
    """An NDJSON stream read to its end: (time.monotonic() the line arrived, the line) each."""
    with http.stream(method, path, **kwargs) as response:
        assert response.status_code == 200 and response.headers["content-type"] == "application/x-ndjson"
        return [(time.monotonic(), json.loads(line)) for line in response.iter_lines() if line]


def test_a_job_is_followed_live_and_metrics_status_and_pipeline_pages_answer(run_as):
    token = every_scope_token("shipped")
    operator = get_user_model().objects.create_superuser("operator", password="shipped-password-1")
    with serving() as site:
        run = ingestion.run_create(source_id=source_of(site).id)
    with shipped(run_as, worker_args=["--handlers", "tests.jobs.handlers", "--queue", "default:2"]) as service:
        worker_ready(service)
        with client(service, token) as http:
            job = http.post(
                "/api/v1/jobs/trigger",
                json={"queue": "default", "task": "test.sleep", "args": {"seconds": 0.3}, "lock_key": "k"},
            )
            events = lines(http, "GET", f"/api/v1/jobs/{job.json()['job_id']}/events")
            metrics = http.get("/metrics")
            status = http.get("/status")
        with client(service) as browser:
            log_in(browser, operator.username, "shipped-password-1")
            page = browser.get(f"/pipeline/runs/{run.id}/")
            refreshed = browser.get(f"/pipeline/runs/{run.id}/?fragment=1")

    kinds = [event["kind"] for _, event in events]
    assert job.status_code == 201 and kinds[:2] == ["queued", "picked"] and kinds[-1] == "done", kinds
    assert metrics.status_code == 200
    assert 'dl_jobs_succeeded_total{queue="default",task="test.sleep"} 1.0' in metrics.text  # the worker's, summed
    assert status.status_code == 200 and status.json()["status"] == "ok"
    assert page.status_code == 200 and 'data-refresh="?fragment=1"' in page.text  # a pending run: it refreshes
    assert refreshed.status_code == 200 and str(run.id) in refreshed.text and "<html" not in refreshed.text


def test_a_process_call_waits_on_the_loop_for_its_answer(run_as):
    token = every_scope_token("shipped")
    process = "/api/v1/processes/test.scripted/shipped-1"
    worker_args = ["--namespace", "test.scripted:2"]
    env = {**PROCESSORS, "LOG_LEVEL": "INFO"}
    with shipped(run_as, worker_args=worker_args, env=env) as service, client(service, token) as http:
        worker_ready(service, namespaces=True)
        init = http.post(f"{process}/init", json={"args": {"events": ["born"]}})
        call = http.post(f"{process}/call", json={"args": {"events": ["called"], "sleep": 0.3, "response": "hi"}})
        failed = http.post(f"{process}/call", json={"args": {"error": "boom"}})
        history = http.get(process).json()["history"]

    assert init.status_code == 200
    assert (call.status_code, call.json()) == (200, {"response": "hi"})
    assert failed.status_code == 422 and failed.json()["details"]["reason"] == {"error": "boom"}
    assert [event["payload"] for event in history] == ["born", "called"]


def test_database_state_runs_stream_their_output_as_it_comes(run_as):
    token = every_scope_token("shipped")
    with shipped(run_as, worker_args=["--queue", "sqlrs:1"]) as service, client(service, token) as http:
        worker_ready(service)
        seed = "CREATE TABLE items (n int); INSERT INTO items SELECT generate_series(1, 3)"
        accepted = http.post(
            "/sqlrs/v1/prepare-jobs",
            json={"prepare_kind": "psql", "image_id": "postgres:15", "psql_args": ["-c", seed]},
        )
        assert accepted.status_code == 201, accepted.text
        prepare_events = lines(http, "GET", accepted.json()["events_url"])
        instance = http.get(accepted.json()["status_url"]).json()["result"]["instance_id"]

        def run(**request) -> list[tuple[float, dict]]:
            return lines(http, "POST", "/sqlrs/v1/runs", json={"instance_ref": instance, **request})

        with_args = run(kind="psql", args=["-At", "-c", "SELECT n FROM items ORDER BY n"])
        with_stdin = run(kind="psql", args=["-At", "-f", "-"], stdin="SELECT 40 + 2;")
        two_steps = run(
            kind="psql", args=[], steps=[{"args": ["-At", "-c", "SELECT 1"]}, {"args": ["-At", "-c", "SELECT 2"]}]
        )
        failing = run(kind="psql", args=["-v", "ON_ERROR_STOP=1", "-c", "SELECT nope"])
        paced = run(
            kind="psql", args=["-At", "-c", "SELECT 'first'", "-c", "SELECT pg_sleep(1)", "-c", "SELECT 'last'"]
        )
        who = run(kind="psql", args=["-At", "-c", "\\! id -u"])
        pgbench = run(kind="pgbench", args=["-i", "-s", "1", "-q"]) + run(
            kind="pgbench", args=["-c", "2", "-t", "10", "-n"]
        )

    def out(events) -> list[str]:
        return [event["data"] for _, event in events if event["type"] == "stdout"]

    def exits(events) -> list[int]:
        return [event["exit_code"] for _, event in events if event["type"] == "exit"]

    assert prepare_events[-1][1]["status"] == "succeeded"
    assert with_args[0][1]["type"] == "start" and out(with_args) == ["1\n", "2\n", "3\n"] and exits(with_args) == [0]
    assert out(with_stdin) == ["42\n"] and exits(with_stdin) == [0]
    assert out(two_steps) == ["1\n", "2\n"] and exits(two_steps) == [0]
    assert any("nope" in event["data"] for _, event in failing if event["type"] == "stderr") and exits(failing) != [0]
    [(first_at, _)] = [(at, event) for at, event in paced if event.get("data") == "first\n"]
    [(last_at, _)] = [(at, event) for at, event in paced if event.get("data") == "last\n"]
    assert last_at - first_at > 0.8  # the first line came as psql printed it, not with the rest
    assert out(who) != ["0\n"]  # never as root: as the servers' user, or the service's own
    assert exits(pgbench) == [0, 0] and any("processed: 20/20" in event.get("data", "") for _, event in pgbench)
