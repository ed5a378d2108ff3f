"""The engine's servers when the service stops: those this process started, stopped cleanly and
back on demand; those left in the state store (``manage.py sqlrsservers stop``, ``make db-stop``),
stopped cleanly too, and nothing signalled that is not the postgres of its directory."""

import os
import shutil
import signal
import subprocess
import time
import uuid

import psycopg
import pytest

from jobs.dbstates.engine import postgres, servers, statefs
from jobs.runtime import registry
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import subprocess_database_env
from tests.e2e.conftest import manage, stop
from tests.helpers import wait_for
from tests.jobs.dbstates.helpers import (
    cluster_state,
    prepare,
    prepared,
    psql_run,
    script,
    server_log,
    wait_terminal,
)

pytestmark = ALL_DATABASES_COMMITTED


def test_the_engine_stops_its_servers_when_a_runworker_exits():
    registry.load()
    assert servers.started_servers_stop in registry._exit_hooks


def test_the_servers_this_process_started_are_stopped_cleanly_and_a_run_starts_them_again(api_token):
    job = prepared(["-c", "CREATE TABLE kept (n int); INSERT INTO kept SELECT generate_series(1, 4)"])
    data_dir = statefs.instance_dir(job.result["instance_id"])
    server = postgres.running(data_dir)
    assert data_dir in postgres.started()

    assert servers.started_servers_stop(deadline=time.monotonic() + 30) == {"stopped": 1, "left": 0}

    assert not postgres.is_alive(server.pid) and postgres.running(data_dir) is None
    assert postgres.started() == []
    assert cluster_state(data_dir) == "shut down"
    logged = len(server_log(data_dir))
    events = psql_run(api_token, job.result["instance_id"], "SELECT count(*) FROM kept")
    assert events[0]["type"] == "log" and "started again" in events[0]["data"]
    assert [e["data"] for e in events if e["type"] == "stdout"] == ["4\n"]
    restart = server_log(data_dir)[logged:]
    assert "database system was shut down at" in restart and "recovery" not in restart, restart


def test_a_server_still_shutting_down_at_the_deadline_is_left_to_finish():
    job = prepared(["-c", "SELECT 1"])
    data_dir = statefs.instance_dir(job.result["instance_id"])
    server = postgres.running(data_dir)

    assert servers.started_servers_stop(deadline=time.monotonic()) == {"stopped": 0, "left": 1}

    wait_for(lambda: not postgres.is_alive(server.pid), timeout=30, what="the fast shutdown to end")
    assert cluster_state(data_dir) == "shut down"


@pytest.fixture
def strangers(state_store):
    """Pid files in the state store that name no server of their directory: a live program that
    is not postgres working in it, and a postgres of another data directory (a backend of the
    test databases' server, when it runs on this machine). Yields their pids."""
    name = f"stranger-{uuid.uuid4().hex[:8]}"
    fake_instance = state_store / "instances" / name
    other_postgres = state_store / "jobs" / name / "runtime"
    for directory in (fake_instance, other_postgres):
        directory.mkdir(parents=True)
    sleeper = subprocess.Popen(["sleep", "60"], cwd=fake_instance)
    with psycopg.connect(**connection_params("default")) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        local = [backend] if os.path.exists(f"/proc/{backend}") else []
        for directory, pid in ((fake_instance, sleeper.pid), (other_postgres, backend)):
            (directory / "postmaster.pid").write_text(f"{pid}\n{directory}\n0\n5432\n\n\n\n")
        yield [sleeper.pid, *local]
        assert conn.execute("SELECT 1").fetchone() == (1,)  # its backend was not signalled
    sleeper.kill()
    sleeper.wait()
    shutil.rmtree(fake_instance)
    shutil.rmtree(other_postgres.parent)


def test_only_the_postgres_of_a_directory_is_signalled(strangers):
    assert servers.store_server_dirs() == []
    assert servers.store_servers_stop(timeout_sec=5) == {"stopped": 0, "left": 0}
    assert all(postgres.is_alive(pid) for pid in strangers)


@pytest.mark.slow
def test_db_stop_stops_the_servers_a_killed_worker_left_running_cleanly(state_store, tmp_path, api_token, strangers):
    env = {**subprocess_database_env(), "SQLRS_STATE_STORE": str(state_store), "SQLRS_SCRIPT_ROOTS": str(tmp_path)}
    path = script(tmp_path, "t.sql", "CREATE TABLE kept (n int); INSERT INTO kept SELECT generate_series(1, 6);")
    job = prepare(path)
    worker = manage("runworker", "--queue", "sqlrs:1", env=env)
    try:
        ended = wait_terminal(job.job_id, timeout=90)
        assert ended.status == "succeeded", ended.error
        data_dir = statefs.instance_dir(ended.result["instance_id"])
        left = postgres.running(data_dir)
        os.kill(worker.pid, signal.SIGKILL)
        worker.wait()
    finally:
        stop(worker)
    assert postgres.is_alive(left.pid)  # a killed worker leaves its servers running
    assert cluster_state(data_dir) == "in production"

    listing = manage("sqlrsservers", env=env)
    assert listing.communicate(timeout=60)[0].split() == [str(data_dir)]
    command = manage("sqlrsservers", "stop", env=env)
    output = command.communicate(timeout=60)[0]

    assert command.returncode == 0 and "stopped 1 database-state server(s)" in output, output
    assert not postgres.is_alive(left.pid) and not (data_dir / "postmaster.pid").exists()
    assert cluster_state(data_dir) == "shut down"
    assert all(postgres.is_alive(pid) for pid in strangers)
    again = manage("sqlrsservers", "stop", env=env)
    assert "no database-state server was running" in again.communicate(timeout=60)[0]
    events = psql_run(api_token, ended.result["instance_id"], "SELECT count(*) FROM kept")
    assert [e["data"] for e in events if e["type"] == "stdout"] == ["6\n"]
