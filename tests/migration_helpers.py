"""What each migration locks, as the server saw it, and which of those locks a live queue cannot
bear (tests/core/management/test_migrate.py; the rule is docs/operating/upgrades.md's).

An event trigger at ``ddl_command_end`` records, inside each DDL statement (so inside
``CREATE INDEX CONCURRENTLY`` and autocommit statements too), every table lock its session holds
then, with the migration the session applies: ``migrate`` names it in ``application_name``.
"""

import threading
import time
from dataclasses import dataclass

import psycopg
from django.db.migrations.loader import MigrationLoader

# The first release's schema: every migration up to these came with 0.1.0, which installs it
# whole on an empty database (there was no release before to upgrade from live).
FIRST_RELEASE = {
    "admin": "0003_logentry_add_action_flag_choices",
    "audit": "0003_registered_action_choices",
    "auth": "0012_alter_user_first_name_max_length",
    "contenttypes": "0002_remove_content_type_name",
    "core": "0002_api_token_scopes",
    "dbstates": "0002_engine_host",
    "ingestion": "0006_operator_permissions",
    "jobs": "0017_status_within_queue_and_task",
    "processes": "0007_process_plural",
    "schedules": "0002_operator_permissions",
    "sessions": "0001_initial",
    "tracking": "0005_no_vacuum_truncate",
}

# Written for every job, event, item, file or process step: a lock that stops their writers
# stops the service, however briefly it is held.
HOT_TABLES = frozenset(
    {
        "dl_jobs",
        "dl_job_events",
        "dl_job_counts",
        "dl_job_dependencies",
        "dl_job_throughput",
        "dl_processes",
        "dl_proc_events",
        "dl_proc_running",
        "dl_proc_schedule",
        "dl_proc_tasks",
        "dl_process_counts",
        "ingestion_items",
        "ingestion_runs",
        "ingestion_run_counts",
        "pipeline_tracking",
        "pipeline_tracking_counts",
        "pipeline_tracking_history",
    }
)
# The modes that conflict with ROW EXCLUSIVE, which every INSERT, UPDATE and DELETE takes.
WRITER_BLOCKING_MODES = frozenset({"ShareLock", "ShareRowExclusiveLock", "ExclusiveLock", "AccessExclusiveLock"})

LOCK_LOG_INSTALL = """
CREATE TABLE migration_lock_log (
    id bigserial PRIMARY KEY, migration text, command_tag text, relation text, mode text, created text
);
CREATE FUNCTION migration_lock_log() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO migration_lock_log (migration, command_tag, relation, mode, created)
    SELECT current_setting('application_name'), tg_tag, c.relname, l.mode,
           (SELECT string_agg(object_identity, ',') FROM pg_event_trigger_ddl_commands()
             WHERE command_tag = 'CREATE TABLE')
      FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
     WHERE l.pid = pg_backend_pid() AND l.locktype = 'relation' AND c.relkind IN ('r', 'p')
       AND c.relnamespace = 'public'::regnamespace AND c.relname <> 'migration_lock_log';
END $$;
CREATE EVENT TRIGGER migration_lock_log ON ddl_command_end EXECUTE FUNCTION migration_lock_log();
"""
LOCK_LOG_REMOVE = """
DROP EVENT TRIGGER IF EXISTS migration_lock_log;
DROP FUNCTION IF EXISTS migration_lock_log();
DROP TABLE IF EXISTS migration_lock_log;
"""


@dataclass(frozen=True)
class LockTaken:
    migration: str  # "app.name"
    table: str
    mode: str


def locks_taken(conn) -> list[LockTaken]:
    """Each table lock a migration held during its DDL, but those on tables it created itself."""
    rows = conn.execute(
        """
        WITH created AS (
            SELECT DISTINCT migration, unnest(string_to_array(created, ',')) AS identity
              FROM migration_lock_log WHERE created IS NOT NULL
        )
        SELECT substr(migration, length('migrate ') + 1), relation, mode FROM migration_lock_log l
         WHERE migration LIKE 'migrate %'
           AND NOT EXISTS (SELECT 1 FROM created c WHERE c.migration = l.migration AND c.identity = 'public.' || l.relation)
         GROUP BY 1, 2, 3 ORDER BY min(id)
        """
    ).fetchall()
    return [LockTaken(*row) for row in rows]


def live_unsafe(locks: list[LockTaken], *, maintenance_windows: dict[str, str]) -> list[LockTaken]:
    """The locks that stop writers of a hot table, taken by a migration not marked as needing a
    maintenance window (``maintenance_windows``: "app.name" → why)."""
    return [
        lock
        for lock in locks
        if lock.table in HOT_TABLES and lock.mode in WRITER_BLOCKING_MODES and lock.migration not in maintenance_windows
    ]


def migrations_since_first_release() -> list:
    """The tree's migrations that 0.1.0 did not have, in the order ``migrate`` applies them."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    released = {node for app, name in FIRST_RELEASE.items() for node in graph.forwards_plan((app, name))}
    plan = [node for leaf in sorted(graph.leaf_nodes()) for node in graph.forwards_plan(leaf)]
    return [graph.nodes[node] for node in dict.fromkeys(plan) if node not in released]


def maintenance_windows(migrations) -> dict[str, str]:
    """ "app.name" → why, for the migrations that say they need the service stopped."""
    return {
        f"{migration.app_label}.{migration.name}": migration.maintenance_window
        for migration in migrations
        if getattr(migration, "maintenance_window", "")
    }


def service_tables(conn) -> str:
    """Every table of the service, quoted and comma-separated for LOCK TABLE (Django's own and the
    lock log aside)."""
    return conn.execute(
        "SELECT string_agg(quote_ident(relname), ', ') FROM pg_class WHERE relkind = 'r' "
        "AND relnamespace = 'public'::regnamespace AND relname NOT LIKE 'django%' AND relname <> 'migration_lock_log'"
    ).fetchone()[0]


class WritersAndAReader:
    """The load a live migration meets, on one database: writers taking ROW EXCLUSIVE on every
    table of the service in turn (what their INSERTs and UPDATEs take), their longest wait
    measured; and a reader that holds ACCESS SHARE on all of them for ``reader_hold_sec`` at the
    start and then once a second, as a long report or a pg_dump does, so that a migration wanting
    a stronger lock must wait for it."""

    def __init__(self, params: dict, *, reader_hold_sec: float):
        self.params, self.reader_hold_sec = params, reader_hold_sec
        self.longest_wait_sec = 0.0
        self.rounds = 0
        self._stop = threading.Event()
        self._reader_holds = threading.Event()
        self._threads = [threading.Thread(target=self._write), threading.Thread(target=self._read)]

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        assert self._reader_holds.wait(10)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _write(self) -> None:
        with psycopg.connect(**self.params, autocommit=True) as conn:
            while not self._stop.is_set():
                started = time.monotonic()
                with conn.transaction():
                    conn.execute(f"LOCK TABLE {service_tables(conn)} IN ROW EXCLUSIVE MODE")
                self.longest_wait_sec = max(self.longest_wait_sec, time.monotonic() - started)
                self.rounds += 1
                time.sleep(0.005)

    def _read(self) -> None:
        with psycopg.connect(**self.params, autocommit=True) as conn:
            while not self._stop.is_set():
                with conn.transaction():
                    conn.execute(f"LOCK TABLE {service_tables(conn)} IN ACCESS SHARE MODE")
                    self._reader_holds.set()
                    self._stop.wait(self.reader_hold_sec)
                self._stop.wait(1.0)
