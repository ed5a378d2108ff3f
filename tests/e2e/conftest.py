"""Real ``manage.py`` processes against the test databases (or a private PostgreSQL)."""

import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from pipeline_project.db import embedded as embedded_postgres
from pipeline_project.db.connections import connection_params, ensure_databases
from pipeline_project.db.urls import database_url
from tests.db_helpers import subprocess_database_env
from tests.e2e import pgbouncer
from tests.e2e.servers import FAST_ENV

ROOT = Path(__file__).resolve().parents[2]


def manage(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **FAST_ENV, **(env or subprocess_database_env())},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **popen,
    )


@contextmanager
def runworker(*args: str, env: dict | None = None):
    """A runworker process running the test handlers; stopped (SIGTERM, then SIGKILL) on exit."""
    process = manage("runworker", "--handlers", "tests.jobs.handlers", *args, env=env)
    try:
        yield process
    finally:
        stop(process)


def stop(process: subprocess.Popen, timeout: float = 20) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


@pytest.fixture(scope="session")
def pgbouncer_server(tmp_path_factory):
    """PgBouncer (transaction mode) in front of the test databases' server, from its first use on."""
    if not Path(pgbouncer.PGBOUNCER).exists():
        pytest.skip("needs Debian's pgbouncer")
    with pgbouncer.started(tmp_path_factory.mktemp("pgbouncer"), server=connection_params("default")) as bouncer:
        yield bouncer


@pytest.fixture(params=["direct", "pgbouncer"])
def route(request):
    """How the test's processes reach the databases: directly, or as deployed behind PgBouncer.
    Through PgBouncer, once the test is done no server connection of the pool may have kept
    anything of a client's session, and the pooler must have logged no warning."""
    if request.param == "direct":
        yield pgbouncer.Route(request.param, subprocess_database_env())
        return
    bouncer = request.getfixturevalue("pgbouncer_server")
    logged = len(bouncer.problems_logged())
    yield pgbouncer.Route(request.param, bouncer.environment(), bouncer)
    assert bouncer.session_leftovers() == {}
    assert bouncer.problems_logged()[logged:] == []


@pytest.fixture
def private_postgres(tmp_path):
    """A PostgreSQL of our own (so a test may restart it), with both databases migrated.

    Yields ``(env, params, data_dir)``: the environment for manage.py processes, psycopg
    parameters of the default database, and the data directory for pg_ctl.
    """
    data_dir = tmp_path / "pgdata"
    server = embedded_postgres.server(data_dir, cleanup_mode="delete")
    host = str(server.get_postmaster_info().socket_dir)
    params = {"host": host, "user": "postgres"}
    ensure_databases(params=params, names=("control", "pipeline"))
    env = {
        "DATABASE_URL": database_url({**params, "dbname": "control"}),
        "PIPELINE_DATABASE_URL": database_url({**params, "dbname": "pipeline"}),
    }
    for alias in ("default", "pipeline"):
        migrate = manage("migrate", "--noinput", "--database", alias, env=env)
        output, _ = migrate.communicate(timeout=180)
        assert migrate.returncode == 0, output
    try:
        yield env, {**params, "dbname": "control"}, data_dir
    finally:
        # Stop it ourselves: after a test's restart, pgserver's handle names the old postmaster.
        embedded_postgres.pg_ctl("-w", "-m", "immediate", "stop", data_dir=data_dir)
        server.cleanup()


def status_counts(params: dict | None = None) -> dict[str, int]:
    with psycopg.connect(**(params or connection_params("default"))) as conn:
        return dict(conn.execute("SELECT status::text, count(*) FROM dl_jobs GROUP BY 1").fetchall())
