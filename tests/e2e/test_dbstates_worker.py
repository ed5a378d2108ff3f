"""The engine with real processes: a runworker killed with -9 in the middle of a prepare (the job
resumes in the next one), and the web server as deployed (reaching the databases directly and
through PgBouncer) driven by a client that finds it the way sqlrs's CLI does (engine.json) and
joins URLs as that CLI does."""

import json
import urllib.error
import urllib.request

import pytest

from jobs.dbstates import postgres, statefs
from jobs.dbstates.models import PrepareTask, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.conftest import manage, stop
from tests.e2e.servers import web_server
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import (
    engine_worker,
    prepare,
    script,
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
