"""Django's ``migrate``, one at a time per database.

Two containers migrating a fresh database at once raced (``IntegrityError`` on
``pg_type_typname_nsp_index``: both created the same table). Each run here first takes a
session advisory lock on the database it migrates, on a connection of its own, and holds it to
the end: a second run waits, then finds nothing left to apply and exits 0 as well. It waits
by trying again, not in ``pg_advisory_lock``: a statement waiting there holds a snapshot, which
the first run's ``CREATE INDEX CONCURRENTLY`` would wait for in turn (a deadlock no one detects).
"""

import time

import psycopg
from django.core.management.commands import migrate

from pipeline_project.db.connections import connection_params

# pg_advisory_lock's key for migrations (any constant no other lock of the project uses).
MIGRATION_LOCK_KEY = 0x6D696772  # "migr"
RETRY_SEC = 0.5


class Command(migrate.Command):
    help = migrate.Command.help + " One run at a time per database (an advisory lock)."

    def handle(self, *args, **options):
        params = connection_params(options["database"])
        with psycopg.connect(**params, autocommit=True) as lock:
            waiting = False
            while not lock.execute("SELECT pg_try_advisory_lock(%s)", (MIGRATION_LOCK_KEY,)).fetchone()[0]:
                if not waiting and options["verbosity"]:
                    self.stdout.write("Another migrate is running on this database; waiting for it.")
                waiting = True
                time.sleep(RETRY_SEC)
            return super().handle(*args, **options)
