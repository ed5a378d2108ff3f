"""The PgBouncer the end-to-end tests run behind: its session audit finds everything a client can
leave on a pooled server connection; a deployment's first steps (create the databases, migrate
both) work through it; and the service refuses to start behind a transaction pooler without a
direct connection for LISTEN."""

from unittest.mock import patch

import psycopg
import pytest

from pipeline_project.db.connections import connection_params, listen_connection_params
from pipeline_project.db.urls import database_url
from tests.db_helpers import subprocess_database_env
from tests.e2e import pgbouncer
from tests.e2e.conftest import manage

pytestmark = pytest.mark.django_db(databases="__all__")


@pgbouncer.needs_pgbouncer
def test_the_audit_finds_everything_a_client_leaves_on_a_pooled_server_connection(tmp_path):
    # A pooler of its own: the connection this test soils must not meet later tests.
    with pgbouncer.started(tmp_path, server=connection_params()) as bouncer:
        with psycopg.connect(**bouncer.params()) as careless:  # one transaction: one server connection
            pid = careless.execute("SELECT pg_backend_pid()").fetchone()[0]
            careless.execute("SELECT set_config('work_mem', '1MB', false)")
            careless.execute("PREPARE kept AS SELECT 1")
            careless.execute("DECLARE held CURSOR WITH HOLD FOR SELECT 1")
            careless.execute("LISTEN somewhere")
            careless.execute("CREATE TEMP TABLE scratch (a int)")
            careless.execute("SELECT pg_advisory_lock(42)")
        # The client is gone; its server connection went back to the pool as it was left.
        left = bouncer.session_leftovers()

    assert left == {
        f"{connection_params()['dbname']} pid {pid}": {
            "settings": {"work_mem": "1024"},
            "prepared_statements": ["kept"],
            "cursors": ["held"],
            "listening": ["somewhere"],
            "temporary_tables": ["scratch"],
            "advisory_locks": ["42"],
        }
    }


@pgbouncer.needs_pgbouncer
def test_the_databases_are_created_and_migrated_through_the_pooler(tmp_path):
    names = [f"{connection_params()['dbname']}_pooled_{suffix}" for suffix in ("control", "pipeline")]
    commands = [["ensuredatabases"], ["migrate", "--noinput"], ["migrate", "--noinput", "--database", "pipeline"]]
    with pgbouncer.started(tmp_path, server=connection_params()) as bouncer:
        env = {
            **bouncer.environment(),
            "DATABASE_URL": database_url({**bouncer.params(), "dbname": names[0]}),
            "PIPELINE_DATABASE_URL": database_url({**bouncer.params(), "dbname": names[1]}),
        }
        try:
            for command in commands:
                run = manage(*command, env=env)
                output, _ = run.communicate(timeout=180)
                assert run.returncode == 0, output
            left, logged = bouncer.session_leftovers(), bouncer.problems_logged()
        finally:  # (the pooler's connections to them are cut: it logs that)
            with psycopg.connect(**{**connection_params(), "dbname": "postgres"}, autocommit=True) as admin:
                for name in names:
                    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    assert left == {}
    assert logged == []


def test_the_listener_connects_where_db_listen_url_says_and_nowhere_else(settings):
    """The URL names the whole target: a port or a role of the pooler's would lead the listener
    back through it (or, with a socket directory, to a socket that does not exist)."""
    pooled = {**connection_params(), "host": "127.0.0.1", "port": 6432, "user": "pooled", "password": "pooled"}
    settings.DB_LISTEN_URL = "postgres://listener@%2Fvar%2Frun%2Fpostgresql/control"
    with patch("pipeline_project.db.connections.connection_params", return_value=pooled):
        listening = listen_connection_params()
        settings.DB_LISTEN_URL = ""
        unset = listen_connection_params()

    target = {"host": "/var/run/postgresql", "user": "listener", "dbname": "control", "port": None, "password": None}
    assert {key: listening.get(key) for key in target} == target
    assert listening["application_name"] == pooled["application_name"]
    assert unset == pooled


def test_behind_a_pooler_the_service_will_not_start_without_a_direct_connection_for_listen():
    checked = manage("check", env={**subprocess_database_env(), "DB_BEHIND_POOLER": "1", "DB_LISTEN_URL": ""})
    output, _ = checked.communicate(timeout=60)

    assert checked.returncode != 0
    assert "DB_BEHIND_POOLER=1 needs DB_LISTEN_URL" in output
