"""migrate, one run at a time per database (pipeline_project/core/management/commands/migrate.py)."""

import io
import threading
import time
from contextlib import ExitStack

import psycopg
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection, router

from pipeline_project.core.management.commands.migrate import MIGRATION_LOCK_KEY
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.migration_helpers import (
    FIRST_RELEASE,
    LOCK_LOG_INSTALL,
    LOCK_LOG_REMOVE,
    LockTaken,
    WritersAndAReader,
    live_unsafe,
    locks_taken,
    maintenance_windows,
    migrations_since_first_release,
)

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


def applied_under_load(*, reader_hold_sec: float) -> tuple[dict, dict, str]:
    """Every migration since the first release undone, then applied again by ``migrate`` while
    writers and a reader work on each database; → (the lock log's locks per alias, the load per
    alias, what migrate printed)."""
    since = migrations_since_first_release()
    aliases = {alias: [m for m in since if router.allow_migrate(alias, m.app_label)] for alias in settings.DATABASES}
    for alias, migrations in aliases.items():
        for app_label in dict.fromkeys(m.app_label for m in migrations):
            call_command("migrate", app_label, FIRST_RELEASE[app_label], database=alias, verbosity=0)
    out = io.StringIO()
    conns = {alias: psycopg.connect(**connection_params(alias), autocommit=True) for alias in aliases}
    try:
        for conn in conns.values():
            conn.execute(LOCK_LOG_INSTALL)
        loads = {
            alias: WritersAndAReader(connection_params(alias), reader_hold_sec=reader_hold_sec) for alias in aliases
        }
        with ExitStack() as stack:
            for load in loads.values():
                stack.enter_context(load)
            for alias in aliases:
                call_command("migrate", database=alias, stdout=out, interactive=False)
        return {alias: locks_taken(conn) for alias, conn in conns.items()}, loads, out.getvalue()
    finally:
        for alias, conn in conns.items():
            conn.execute(LOCK_LOG_REMOVE)
            conn.close()
            call_command("migrate", database=alias, verbosity=0)


def test_every_migration_since_the_first_release_applies_under_load_and_stops_no_writer_for_a_second():
    since = migrations_since_first_release()
    assert since, "nothing to apply live: FIRST_RELEASE is out of date"

    locks, loads, printed = applied_under_load(reader_hold_sec=1.5)

    taken = [lock for alias_locks in locks.values() for lock in alias_locks]
    assert {f"{m.app_label}.{m.name}" for m in since} <= {lock.migration for lock in taken}, printed
    assert live_unsafe(taken, maintenance_windows=maintenance_windows(since)) == []
    # The reader held its locks past lock_timeout: a migration gave up, was rolled back and tried again.
    assert "gave up waiting 500 ms for a lock" in printed and "trying again" in printed
    for load in loads.values():
        assert load.rounds > 10 and load.longest_wait_sec < 1.0, (load.rounds, load.longest_wait_sec)
    with connection.cursor() as cursor:  # the session's settings put back for whoever uses it next
        cursor.execute("SELECT current_setting('lock_timeout'), current_setting('application_name')")
        assert cursor.fetchone()[0] == "0"


def test_a_migration_locking_a_queue_table_whole_is_refused_unless_it_asks_for_a_maintenance_window():
    probe = "jobs.9999_add_a_column_to_dl_jobs"
    with psycopg.connect(**connection_params("default"), autocommit=True) as conn:
        conn.execute(LOCK_LOG_INSTALL)
        try:
            with conn.transaction(force_rollback=True):
                conn.execute("SELECT set_config('application_name', %s, true)", (f"migrate {probe}",))
                conn.execute("ALTER TABLE dl_jobs ADD COLUMN probe integer")  # ADD COLUMN: ACCESS EXCLUSIVE
                conn.execute("CREATE INDEX dl_workers_probe ON dl_workers (hostname)")  # not a hot table
                locks = locks_taken(conn)
        finally:
            conn.execute(LOCK_LOG_REMOVE)

    assert LockTaken(probe, "dl_jobs", "AccessExclusiveLock") in live_unsafe(locks, maintenance_windows={})
    assert {lock.table for lock in live_unsafe(locks, maintenance_windows={})} == {"dl_jobs"}
    assert live_unsafe(locks, maintenance_windows={probe: "rewrites dl_jobs"}) == []
