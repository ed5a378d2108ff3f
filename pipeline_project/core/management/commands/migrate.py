"""Django's ``migrate``, one at a time per database, safe to run while the service works.

Two containers migrating a fresh database at once raced (``IntegrityError`` on
``pg_type_typname_nsp_index``: both created the same table). Each run here first takes a
session advisory lock on the database it migrates, on a connection of its own, and holds it to
the end: a second run waits, then finds nothing left to apply and exits 0 as well. It waits
by trying again, not in ``pg_advisory_lock``: a statement waiting there holds a snapshot, which
the first run's ``CREATE INDEX CONCURRENTLY`` would wait for in turn (a deadlock no one detects).

On a live database a migration's lock may wait behind a long transaction, and every statement of
the queue on that table would wait behind the migration. So each migration in a transaction runs
with ``MIGRATION_LOCK_TIMEOUT_MS``: it gives up, is rolled back whole, and the run tries again
(``MIGRATION_LOCK_ATTEMPTS`` times). A migration outside a transaction (``CREATE INDEX
CONCURRENTLY``) waits as long as it must: what it takes blocks no writer, and one that gave up
would leave an invalid index behind. The session names the migration it applies
(``application_name``), so pg_stat_activity and pg_locks show who holds what during an upgrade.
"""

import time

import psycopg
from django.conf import settings
from django.core.management.commands import migrate
from django.db import OperationalError, connections

from pipeline_project.db.connections import connection_params

# pg_advisory_lock's key for migrations (any constant no other lock of the project uses).
MIGRATION_LOCK_KEY = 0x6D696772  # "migr"
RETRY_SEC = 0.5


class Command(migrate.Command):
    help = migrate.Command.help + " One run at a time per database (an advisory lock); live-safe lock waits."

    def handle(self, *args, **options):
        self.database = options["database"]
        params = connection_params(self.database)
        with psycopg.connect(**params, autocommit=True) as lock:
            waiting = False
            while not lock.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK_KEY,)).fetchone()[0]:
                if not waiting and options["verbosity"]:
                    self.stdout.write("Another migrate is running on this database; waiting for it.")
                waiting = True
                time.sleep(RETRY_SEC)
            try:
                return self._migrate_retrying_lock_waits(*args, **options)
            finally:
                self._session(application_name=None, lock_timeout_ms=None)
                # Released now, not when the server gets round to ending the closed session's
                # backend: whoever tries it next (a second migrate, a test) finds it free.
                lock.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK_KEY,))

    def _migrate_retrying_lock_waits(self, *args, **options):
        attempt = 1
        while True:
            try:
                return super().handle(*args, **options)
            except OperationalError as error:
                gave_up_waiting = isinstance(error.__cause__, psycopg.errors.LockNotAvailable)
                if not gave_up_waiting or attempt == settings.MIGRATION_LOCK_ATTEMPTS:
                    raise
                attempt += 1
                if options["verbosity"]:
                    self.stdout.write(
                        f" gave up waiting {settings.MIGRATION_LOCK_TIMEOUT_MS} ms for a lock "
                        f"({error.__cause__.diag.message_primary}); trying again "
                        f"(attempt {attempt} of {settings.MIGRATION_LOCK_ATTEMPTS})"
                    )
                time.sleep(RETRY_SEC)

    def migration_progress_callback(self, action, migration=None, fake=False):
        if action in ("apply_start", "unapply_start"):
            self._session(
                application_name=f"migrate {migration.app_label}.{migration.name}",
                lock_timeout_ms=settings.MIGRATION_LOCK_TIMEOUT_MS if migration.atomic else 0,
            )
        super().migration_progress_callback(action, migration, fake)

    def _session(self, *, application_name: str | None, lock_timeout_ms: int | None) -> None:
        """Name the session and bound its lock waits, or (None) put both back as they were."""
        with connections[self.database].cursor() as cursor:
            if application_name is None:
                cursor.execute("RESET application_name; RESET lock_timeout")
            else:
                cursor.execute(
                    "SELECT set_config('application_name', %s, false), set_config('lock_timeout', %s, false)",
                    [application_name[:63], f"{lock_timeout_ms}ms"],
                )
