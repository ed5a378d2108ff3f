"""The engine with real processes: a runworker killed with -9 in the middle of a prepare (the job
resumes in the next one), a runworker stopped with SIGTERM (the servers it started are shut down
cleanly before it exits, and come back when a run asks), and the web server as deployed (reaching
the databases directly and through PgBouncer) driven by a client that finds it the way sqlrs's
CLI does (engine.json) and joins URLs as that CLI does."""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from jobs.dbstates.engine import postgres, statefs
from jobs.dbstates.models import PrepareJob, PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.conftest import ROOT, manage, stop
from tests.e2e.servers import FAST_ENV, web_server
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import (
    cluster_state,
    engine_worker,
    prepare,
    psql_run,
    script,
    server_log,
    servers_stop,
    short_state_store,
    wait_terminal,
)

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]


@pytest.fixture
def engine_env(settings, tmp_path):
    with short_state_store() as root:
        settings.SQLRS_STATE_STORE = root
        settings.SQLRS_SCRIPT_ROOTS = [str(tmp_path)]
        settings.DL_DEFAULT_LEASE_TTL_SEC = 3  # the killed worker's lease runs out soon
        yield {**subprocess_database_env(), "SQLRS_STATE_STORE": str(root), "SQLRS_SCRIPT_ROOTS": str(tmp_path)}
        servers_stop()


def engine_worker_process(env):
    return manage("runworker", "--queue", "sqlrs:1", env=env)


def test_a_prepare_whose_worker_was_killed_resumes_and_succeeds(engine_env, tmp_path):
    path = script(tmp_path, "slow.sql", "SELECT pg_sleep(2); CREATE TABLE survived (a int);")
    job = prepare(path)
    doomed = engine_worker_process(engine_env)
    try:
        wait_for(
            lambda: PrepareTask.objects.filter(job_id=job.job_id, task_id="execute-0", status="running").exists(),
            timeout=60,
            what="the step to start",
        )
        runtime = statefs.job_runtime_dir(job.job_id)
        wait_for(lambda: postgres.running(runtime), timeout=10, what="the step's server")
        orphan = postgres.running(runtime)
        doomed.kill()
        doomed.wait()
    finally:
        stop(doomed)

    survivor = engine_worker_process(engine_env)
    try:
        ended = wait_terminal(job.job_id, timeout=90)
    finally:
        assert stop(survivor) == 0

    assert ended.status == "succeeded", ended.error
    assert State.objects.filter(state_id=ended.result["state_id"]).exists()
    assert not postgres.is_alive(orphan.pid)  # the dead worker's server was stopped, not left behind
    assert not statefs.job_runtime_dir(job.job_id).exists()


SHUTDOWN_TIMEOUT_SEC = float(FAST_ENV["DL_SHUTDOWN_TIMEOUT_SEC"])


def sigterm_exit(worker, *, within: float = SHUTDOWN_TIMEOUT_SEC + 1.0) -> tuple[int, float, str]:
    """SIGTERM ``worker``; (its exit status, seconds it took, its output). Fails past ``within``."""
    sent = time.monotonic()
    worker.send_signal(signal.SIGTERM)
    output = worker.communicate(timeout=within)[0]
    return worker.returncode, time.monotonic() - sent, output


def instance_of(job_id: str) -> tuple[str, postgres.Server]:
    ended = wait_terminal(job_id, timeout=90)
    assert ended.status == "succeeded", ended.error
    instance_id = ended.result["instance_id"]
    return instance_id, postgres.running(statefs.instance_dir(instance_id))


def test_a_stopped_worker_shuts_its_instance_servers_down_cleanly_and_they_come_back(engine_env, tmp_path, api_token):
    path = script(tmp_path, "kept.sql", "CREATE TABLE kept (n int); INSERT INTO kept SELECT generate_series(1, 7);")
    job = prepare(path)
    worker = engine_worker_process(engine_env)
    try:
        instance_id, server = instance_of(job.job_id)
        assert cluster_state(server.data_dir) == "in production"
        code, seconds, output = sigterm_exit(worker)
    finally:
        stop(worker)

    assert code == 0 and seconds < SHUTDOWN_TIMEOUT_SEC, output
    assert "stopped database-state servers" in output
    assert not postgres.is_alive(server.pid) and not (server.data_dir / "postmaster.pid").exists()
    assert cluster_state(server.data_dir) == "shut down"
    assert server_log(server.data_dir).rstrip().endswith("database system is shut down")

    logged = len(server_log(server.data_dir))
    again = engine_worker_process(engine_env)
    try:
        events = psql_run(api_token, instance_id, "SELECT count(*) FROM kept")
        assert events[0]["type"] == "log" and "started again" in events[0]["data"]
        assert [e["data"] for e in events if e["type"] == "stdout"] == ["7\n"]
        restart = server_log(server.data_dir)[logged:]
        assert "database system was shut down at" in restart and "recovery" not in restart, restart
        second = prepare(path)  # the same script: a cache hit, a new instance by the new worker
        assert instance_of(second.job_id)[0] != instance_id
    finally:
        assert sigterm_exit(again)[0] == 0


def test_a_worker_stopped_while_a_prepare_runs_still_stops_its_servers_cleanly_in_its_timeout(engine_env, tmp_path):
    done = prepare(["-c", "CREATE TABLE t (a int)"])
    slow = script(tmp_path, "slow.sql", "SELECT pg_sleep(60);")
    worker = engine_worker_process(engine_env)
    try:
        _instance_id, instance = instance_of(done.job_id)
        running = prepare(slow)
        runtime = statefs.job_runtime_dir(running.job_id)
        step = wait_for(lambda: postgres.running(runtime), timeout=60, what="the slow step's server")
        code, seconds, output = sigterm_exit(worker)
    finally:
        stop(worker)

    assert code == 0 and seconds < SHUTDOWN_TIMEOUT_SEC + 0.5, output
    assert not postgres.is_alive(instance.pid) and cluster_state(instance.data_dir) == "shut down"
    assert not postgres.is_alive(step.pid)  # the released step's server did not outlive its worker
    assert not PrepareJob.objects.get(job_id=running.job_id).is_terminal  # released: the next worker resumes it


def pid_namespace_command() -> list[str] | None:
    """The prefix that runs a command as PID 1 of a PID namespace of its own, as in a container
    (when it exits, the kernel kills whatever is left in it), if this machine lets us."""
    prefix = ["unshare", "--pid", "--fork", "--mount-proc"]
    try:
        ok = subprocess.run([*prefix, "true"], check=False, capture_output=True, timeout=10).returncode == 0
    except (FileNotFoundError, subprocess.TimeoutExpired):
        ok = False
    return prefix if ok else None


def test_a_worker_that_is_pid_1_shuts_its_servers_down_before_it_exits(engine_env):
    prefix = pid_namespace_command()
    if prefix is None:
        pytest.skip("needs unshare --pid --mount-proc (root, or user namespaces)")
    job = prepare(["-c", "CREATE TABLE t (a int)"])
    worker = subprocess.Popen(
        [*prefix, sys.executable, "manage.py", "runworker", "--queue", "sqlrs:1"],
        cwd=ROOT,
        env={**os.environ, **FAST_ENV, **engine_env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        ended = wait_terminal(job.job_id, timeout=90)
        assert ended.status == "succeeded", ended.error
        data_dir = statefs.instance_dir(ended.result["instance_id"])  # its pid file names a pid of the namespace
        assert cluster_state(data_dir) == "in production"
        [pid_1] = Path(f"/proc/{worker.pid}/task/{worker.pid}/children").read_text().split()  # unshare's child
        os.kill(int(pid_1), signal.SIGTERM)  # as `docker stop` does (unshare forwards no signal)
        output = worker.communicate(timeout=SHUTDOWN_TIMEOUT_SEC + 1.0)[0]
    finally:
        stop(worker)

    assert worker.returncode == 0, output
    assert cluster_state(data_dir) == "shut down"  # not killed with the namespace: shut down before it ended


class SqlrsCli:
    """The HTTP side of sqlrs's CLI (frontend/cli-go/internal/client): requests go to
    ``baseURL + path`` (the endpoint trimmed of its trailing slashes, http:// added when it has
    no scheme), and a URL the engine returned is resolved by ``resolveURL``: an absolute URL as
    it is, ``/x`` as ``baseURL + /x``, ``x`` as ``baseURL + / + x``."""

    def __init__(self, endpoint: str, token: str):
        value = endpoint.strip()
        if not value.startswith(("http://", "https://")):
            value = "http://" + value
        self.base_url = value.rstrip("/")
        self.token = token

    def resolve_url(self, raw: str) -> str:
        value = raw.strip()
        if value.startswith(("http://", "https://")):
            return value
        return self.base_url + (value if value.startswith("/") else "/" + value)

    def request(self, method: str, path: str, data=None, *, url: str | None = None):
        """(status, headers, body) of ``method`` on ``baseURL + path`` (or on ``url``)."""
        body = json.dumps(data).encode() if data is not None else None
        request = urllib.request.Request(url or self.base_url + path, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self.token}")
        if body is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                return response.status, response.headers, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.headers, error.read()


def test_a_client_that_finds_the_engine_by_engine_json_reaches_every_url_it_is_given(engine_env, route, tmp_path):
    path = script(tmp_path, "t.sql", "CREATE TABLE t (a int); INSERT INTO t SELECT generate_series(1, 10);")
    with web_server(env={**engine_env, **route.env}) as (port, _process):
        endpoint = f"http://127.0.0.1:{port}/sqlrs/"
        writer = manage("writeenginejson", str(tmp_path / "engine.json"), "--endpoint", endpoint, env=engine_env)
        assert writer.wait(timeout=60) == 0, writer.stdout.read()
        engine = json.loads((tmp_path / "engine.json").read_text())
        cli = SqlrsCli(engine["endpoint"], engine["authToken"])

        code, _headers, body = cli.request("GET", "/v1/health")
        assert code == 200 and json.loads(body)["instanceId"] == engine["instanceId"]
        code, headers, body = cli.request("POST", "/v1/health")
        assert code == 405 and headers["Content-Type"] == "application/json" and json.loads(body)["code"]

        request = {"prepare_kind": "psql", "image_id": "postgres:15", "psql_args": ["-f", str(path)]}
        code, created, body = cli.request("POST", "/v1/prepare-jobs", request)
        assert code == 201, body
        accepted = json.loads(body)
        job_id = accepted["job_id"]
        with engine_worker():
            code, headers, body = cli.request("GET", "", url=cli.resolve_url(accepted["events_url"]))
        assert code == 200 and headers["Content-Type"] == "application/x-ndjson", body[:300]
        assert json.loads(body.splitlines()[-1])["status"] == "succeeded"

        by_status_url = cli.request("GET", "", url=cli.resolve_url(accepted["status_url"]))
        by_location = cli.request("GET", "", url=cli.resolve_url(created["Location"]))
        by_path = cli.request("GET", f"/v1/prepare-jobs/{job_id}")  # GetPrepareJob builds its own path
        assert by_status_url[0] == by_path[0] == by_location[0] == 200
        assert json.loads(by_status_url[2]) == json.loads(by_path[2])
        assert json.loads(by_path[2])["result"]["dsn"]

        code, _headers, body = cli.request("DELETE", f"/v1/prepare-jobs/{job_id}")
        assert code == 200 and json.loads(body)["outcome"] == "deleted"
        assert not statefs.job_dir(job_id).exists()
