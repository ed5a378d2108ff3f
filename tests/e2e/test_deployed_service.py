"""The service as deployed (gunicorn's ASGI web server and a runworker process) reached directly
and through PgBouncer in transaction mode, with DB_BEHIND_POOLER=1 and LISTEN on a direct
connection (DB_LISTEN_URL): jobs triggered over HTTP are picked on NOTIFY and their events
followed live, jobs sharing lock keys run one at a time, a process call answers and a timer
fires, an ingestion run started from the admin completes. The safety nets (the workers' sweep,
the streams' re-reads) are set far beyond each test's time, so every wake-up is a NOTIFY.
Through PgBouncer, the ``route`` fixture then checks that no server connection of the pool
kept anything of a client's session."""

import itertools
import json
import statistics
import time
from contextlib import contextmanager
from datetime import datetime

import httpx
import pytest
from django.contrib.auth import get_user_model

from ingestion.models import IngestionRun
from jobs.queue.models import Job, JobEvent, Worker
from pipeline_project.db.connections import LISTENER_CHECK_SQL
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.e2e.conftest import runworker
from tests.e2e.servers import web_server
from tests.helpers import every_scope_token, wait_for
from tests.ingestion import site as website
from tests.ingestion.helpers import source_of

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]

WEB, WORKER = "e2e-web", "e2e-worker"  # application names, to find their sessions in pg_stat_activity
SLOW_SAFETY_NETS = {"DL_SWEEP_SEC": "60", "DL_EVENTS_RECHECK_SEC": "60"}
SERVED = ("--queue", "default:2", "--namespace", "test.scripted:2")


@contextmanager
def deployed(route, tmp_path):
    """The web server and a runworker (the default queue and a process namespace), both reaching
    the databases by ``route``; yields an HTTP client of the web server authenticated as a daemon.
    Neither may have logged an error by the time they stopped."""
    env = {
        **route.env,
        **SLOW_SAFETY_NETS,
        "LOG_LEVEL": "WARNING",  # the pipes are read only at the end: what is there must fit
        "PROCESSES_HANDLER_MODULES": "tests.jobs.processes.processors",
        "INGESTION_STORAGE_DIR": str(tmp_path),
        "INGESTION_SETTLE_PERIOD_SEC": "0.2",
    }
    token = every_scope_token("e2e")
    with (
        web_server(env={**env, "DB_APPLICATION_NAME": WEB}) as (port, server),
        runworker(*SERVED, env={**env, "DB_APPLICATION_NAME": WORKER}) as worker,
    ):
        wait_for(
            lambda: worker.poll() is not None or Worker.objects.filter(pid=worker.pid).exists(),
            timeout=60,
            what="the worker to register",
        )
        assert worker.poll() is None, worker.stdout.read()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as client:
            yield client
    logged = worker.stdout.read() + server.stderr.read()
    assert '"ERROR"' not in logged and "Traceback" not in logged, logged[-3000:]


def follow(client: httpx.Client, job_id: str) -> list[tuple[float, dict]]:
    """A job's event stream to its end: (time.time() the line arrived, event) per event."""
    with client.stream("GET", f"/api/v1/jobs/{job_id}/events") as response:
        assert response.status_code == 200
        return [(time.time(), json.loads(line)) for line in response.iter_lines() if line]


def test_jobs_triggered_over_http_are_picked_on_notify_and_their_events_followed_live(route, tmp_path):
    trigger = {"queue": "default", "task": "test.sleep", "args": {"seconds": 0.3}}
    with deployed(route, tmp_path) as client:
        warm_up = client.post("/api/v1/jobs/trigger", json={**trigger, "lock_key": "warm-up"}).json()["job_id"]
        follow(client, warm_up)  # the worker listens, the web server's hub too
        picked_after, followed_after = [], []
        for n in range(5):
            job_id = client.post("/api/v1/jobs/trigger", json={**trigger, "lock_key": f"solo-{n}"}).json()["job_id"]
            events = follow(client, job_id)
            kinds = [event["kind"] for _, event in events]
            assert kinds[:2] == ["queued", "picked"] and kinds[-1] == "done", kinds  # heartbeats between
            picked = JobEvent.objects.get(job_id=job_id, kind="picked").ts
            picked_after.append((picked - Job.objects.get(job_id=job_id).created_at).total_seconds())
            received, done = events[-1]  # written 0.3 s after the stream began to wait
            followed_after.append(received - datetime.fromisoformat(done["ts"]).timestamp())

        bulk = [{**trigger, "args": {"seconds": 0.02}, "lock_key": f"shared-{n % 3}"} for n in range(30)]
        assert client.post("/api/v1/jobs/trigger/bulk", json={"jobs": bulk}).status_code == 201
        wait_for(lambda: Job.objects.filter(status="succeeded").count() == 36, timeout=30, what="the bulk's jobs")
        if route.bouncer:
            outside_the_pool = sessions_outside_the_pool(route.bouncer)
            clients = {row["application_name"] for row in route.bouncer.show("CLIENTS")}

    print(f"\n{route.name}: picked after {ms(picked_after)} ms, followed after {ms(followed_after)} ms")  # noqa: T201 - reports the figures
    # On NOTIFY: the sweep and the events recheck that would serve them otherwise run every 60 s. The
    # latencies themselves are the benchmarks' (docs/performance.md); here the suite's other tests share the cores.
    assert statistics.median(picked_after) < 0.25 and max(picked_after) < 1, picked_after
    assert statistics.median(followed_after) < 0.25 and max(followed_after) < 1, followed_after
    runs: dict[str, list] = {}
    for job in Job.objects.filter(lock_key__startswith="shared-"):
        result = JobEvent.objects.get(job_id=job.job_id, kind="done").payload["result"]
        runs.setdefault(job.lock_key, []).append((result["started"], result["ended"]))
    for key, intervals in runs.items():
        intervals.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(intervals)), f"{key} overlapped"
    if route.bouncer:
        # Only the LISTEN connections go straight to the server; everything else through the pooler.
        assert set(outside_the_pool) == {WEB, WORKER}, outside_the_pool
        assert all(listening(query) for queries in outside_the_pool.values() for query in queries), outside_the_pool
        assert {WEB, WORKER} <= clients


def test_a_process_call_answers_and_a_timer_fires_through_the_web_server_and_a_worker(route, tmp_path):
    process = "/api/v1/processes/test.scripted/e2e-1"
    init = {"events": ["born"], "action": {"set_timer": 0.5}, "aux_state": {"on_timeout": [{"events": ["fired"]}]}}
    with deployed(route, tmp_path) as client:
        assert client.post(f"{process}/init", json={"args": init}).status_code == 200
        calls = []
        for n in range(5):
            started = time.monotonic()
            answer = client.post(f"{process}/call", json={"args": {"events": [n], "response": {"n": n}}})
            calls.append(time.monotonic() - started)
            assert (answer.status_code, answer.json()) == (200, {"response": {"n": n}})
        fired = wait_for(
            lambda: "fired" in [event["payload"] for event in client.get(process).json()["history"]],
            timeout=10,
            what="the timer",
        )
        refused = client.post(f"{process}/call", json={"args": {"error": "boom"}})
        trace = client.get(f"{process}/trace").json()["tasks"]

    print(f"\n{route.name}: calls took {ms(calls)} ms")  # noqa: T201 - reports the figures
    # A waiter re-reads its task every 5 s without a NOTIFY, a worker sweeps every 60 s here.
    assert max(calls) < 1, calls
    assert refused.status_code == 422 and refused.json()["details"]["reason"] == {"error": "boom"}
    assert fired
    [timer] = [task for task in trace if task["task_type"] == "timeout"]
    late = datetime.fromisoformat(timer["running_time"]) - datetime.fromisoformat(timer["scheduled_time"])
    assert timer["status"] == "finished" and late.total_seconds() < 1, timer


def test_an_ingestion_run_started_from_the_admin_completes_and_every_page_shows_it(route, tmp_path):
    user = get_user_model().objects.create_superuser("operator", password="e2e-password-1")
    with website.serving() as site:
        site.files = {
            "/index.html": ("text/html", b'<a href="/docs/a.pdf">A</a> <a href="/docs/b.pdf">B</a>'),
            "/docs/a.pdf": ("application/pdf", website.pdf("The first report of the ministry, on roads and schools.")),
            "/docs/b.pdf": ("application/pdf", website.pdf("The second report of the ministry, on public spending.")),
        }
        source = source_of(site)
        with deployed(route, tmp_path) as client:
            del client.headers["Authorization"]  # an operator's browser: a session, no token
            log_in(client, user.username, "e2e-password-1")
            changelist = "/admin/ingestion/source/"
            started = admin_post(client, changelist, {"action": "run_sources", "_selected_action": source.id})
            assert started.status_code == 302, started.text[:500]
            run = wait_for(lambda: IngestionRun.objects.filter(source=source).first(), what="the run")
            wait_for(
                lambda: IngestionRun.objects.get(id=run.id).status in ("completed", "failed"),
                timeout=30,
                what="the run to end",
            )
            job = Job.objects.filter(args__run_id=str(run.id)).first()
            pages = {
                path: client.get(path)
                for path in (
                    changelist,
                    f"/pipeline/runs/{run.id}/",
                    "/pipeline/",
                    "/admin/jobs/job/",
                    f"/admin/jobs/job/{job.job_id}/change/",
                    "/admin/jobs/job/dashboard/",
                    "/admin/processes/process/",
                    "/admin/tracking/pipelinetracking/",
                    "/admin/tracking/pipelinetracking/summary/",
                )
            }

    ended = IngestionRun.objects.get(id=run.id)
    assert ended.status == "completed", ended.error_message
    assert ended.stats_json["ocr"]["completed"] == 2
    assert {path: response.status_code for path, response in pages.items()} == dict.fromkeys(pages, 200)
    assert "run" in pages[changelist].text and "started" in pages[changelist].text  # the action's message
    assert "completed" in pages[f"/pipeline/runs/{run.id}/"].text


def log_in(client: httpx.Client, username: str, password: str) -> None:
    """A staff session through the admin's login form."""
    response = admin_post(client, "/admin/login/?next=/admin/", {"username": username, "password": password})
    assert response.status_code == 302 and response.headers["location"] == "/admin/", response.text[:500]


def admin_post(client: httpx.Client, path: str, data: dict) -> httpx.Response:
    """A form POST as a browser sends it: with the CSRF cookie's token (got by a GET first)."""
    client.get(path)
    return client.post(path, data={**data, "csrfmiddlewaretoken": client.cookies["csrftoken"]})


def sessions_outside_the_pool(bouncer) -> dict[str, list[str]]:
    """``{application name: [last query, ...]}`` of the web server's and the worker's sessions on
    the server that the pooler does not hold. A session that is not a LISTEN counts only if it is
    still there 5 s later: one the pooler was closing at the first look (its backend outlives
    the pooler's list for a moment, under a CI run's load for more than half a second) is gone."""

    def sessions() -> dict[int, tuple[str, str]]:
        with raw_connection(autocommit=True) as conn:
            rows = conn.execute(
                # This test's database: another xdist worker's deployment is on its own.
                "SELECT pid, application_name, query FROM pg_stat_activity "
                "WHERE application_name = ANY(%s) AND datname = current_database()",
                [[WEB, WORKER]],
            ).fetchall()
        return {pid: (name, query) for pid, name, query in rows}

    first = sessions()
    pooled = bouncer.server_pids()  # read after: a server connection seen above is still there
    candidates = {pid: session for pid, session in first.items() if pid not in pooled}
    deadline = time.monotonic() + 5
    while any(not listening(query) for _, query in candidates.values()) and time.monotonic() < deadline:
        time.sleep(0.25)
        still = sessions()
        candidates = {pid: session for pid, session in candidates.items() if pid in still}
    outside: dict[str, list[str]] = {}
    for name, query in candidates.values():
        outside.setdefault(name, []).append(query)
    return outside


def listening(query: str) -> bool:
    """A LISTEN connection's last statement: its LISTEN, or the check it runs every 2 s."""
    return query.startswith("LISTEN") or query == LISTENER_CHECK_SQL


def ms(seconds: list[float]) -> list[int]:
    return [round(value * 1000) for value in seconds]
