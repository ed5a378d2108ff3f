"""migrate, one run at a time per database (pipeline_project/core/management/commands/migrate.py)."""

import io
import threading
import time

import psycopg
import pytest
from django.core.management import call_command

from pipeline_project.core.management.commands.migrate import MIGRATION_LOCK_KEY
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES_COMMITTED

pytestmark = ALL_DATABASES_COMMITTED


def test_a_second_migrate_waits_for_the_first_holding_no_snapshot_then_finds_nothing_to_do():
    out = io.StringIO()
    with psycopg.connect(**connection_params("default"), autocommit=True) as first:
        first.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK_KEY,))  # a migrate in progress
        second = threading.Thread(target=call_command, args=("migrate",), kwargs={"stdout": out, "interactive": False})
        second.start()
        deadline = time.monotonic() + 10
        while "waiting for it" not in out.getvalue():
            assert time.monotonic() < deadline and second.is_alive(), out.getvalue()
            time.sleep(0.05)
        # While it waits, no backend of the database holds a snapshot that a CREATE INDEX
        # CONCURRENTLY of the first run would wait for (a deadlock nobody detects).
        snapshots = first.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_xmin IS NOT NULL "
            "AND pid <> pg_backend_pid()"
        ).fetchone()[0]
        assert snapshots == 0
        assert second.is_alive()
    second.join(30)

    assert not second.is_alive()
    assert "No migrations to apply" in out.getvalue()


@pytest.mark.parametrize("database", ["default", "pipeline"])
def test_migrate_releases_its_lock_when_done(database):
    call_command("migrate", database=database, stdout=io.StringIO(), interactive=False)

    with psycopg.connect(**connection_params(database), autocommit=True) as conn:
        assert conn.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK_KEY,)).fetchone()[0]
