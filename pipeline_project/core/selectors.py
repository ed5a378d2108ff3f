"""Reads for API tokens and the service's own status."""

import functools
import platform

import django
from django.conf import settings
from django.db import DatabaseError, connections
from django.db.migrations.executor import MigrationExecutor
from django.utils.module_loading import import_string

import pipeline_project
from pipeline_project.core.models import ApiToken
from pipeline_project.db import sql
from pipeline_project.db.counts import KEPT
from pipeline_project.db.storable import first_line


def api_token_by_key(*, key: str) -> ApiToken | None:
    # Every token-authenticated request reads its token: one plain statement, not a query the
    # ORM compiles anew each time (a tenth of a small request's CPU).
    fields, statement = _token_read()
    [row] = sql.rows(statement, {"key_hash": ApiToken.hash_key(key)}) or [None]
    return None if row is None else ApiToken.from_db("default", fields, row)


@functools.cache
def _token_read() -> tuple[list[str], str]:
    fields = [field.attname for field in ApiToken._meta.concrete_fields]
    columns = ", ".join(field.column for field in ApiToken._meta.concrete_fields)
    return (
        fields,
        f"SELECT {columns} FROM {ApiToken._meta.db_table} WHERE key_hash = %(key_hash)s AND revoked_at IS NULL",
    )


def database_status(*, alias: str) -> dict:
    """Reachability, server version and unapplied migrations of one database alias."""
    connection = connections[alias]
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            server_version = cursor.fetchone()[0]
        executor = MigrationExecutor(connection)
        plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    except DatabaseError as exc:
        return {"reachable": False, "error": first_line(exc)}
    unapplied = [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]
    status = {"reachable": True, "server_version": server_version, "unapplied_migrations": unapplied}
    # Reachable through the connections this process holds, while the server turns new ones away
    # (max_connections reached): said, without failing readiness, since requests are still served.
    refused = connection.pool.refused if connection.pool is not None else None
    if refused is not None:
        status["new_connections_refused"] = first_line(refused)
    return status


def system_status() -> dict:
    """The /status document; apps add sections through settings.STATUS_SECTIONS."""
    databases = {alias: database_status(alias=alias) for alias in settings.DATABASES}
    healthy = all(db["reachable"] and not db["unapplied_migrations"] for db in databases.values())
    document = {
        "status": "ok" if healthy else "degraded",
        "versions": {
            "service": pipeline_project.__version__,
            "django": django.get_version(),
            "python": platform.python_version(),
        },
        "databases": databases,
    }
    if all(db["reachable"] for db in databases.values()):
        for path in getattr(settings, "STATUS_SECTIONS", []):
            name, section = import_string(path)()
            document[name] = section
    return document


COUNTS_SAMPLE_ROWS = 1000  # /status counts exactly one batch of at most this many rows per kept count


def kept_counts_section() -> tuple[str, dict]:
    """/status's word on each kept count (``pipeline_project.db.counts``): whether it agrees with
    its table on a sample, and if not what disagrees and what mends it. Said, not failing
    readiness: the service works on, with wrong counts on its pages until they are rebuilt."""
    section = {}
    for counts in KEPT:
        try:
            wrong = counts.disagreement(sample_rows=COUNTS_SAMPLE_ROWS)
        except DatabaseError as exc:  # a table not migrated yet: the databases' section says so
            wrong = {"error": first_line(exc)}
        section[counts.counts_table] = (
            {"agrees": True} if wrong is None else {"agrees": False, **wrong, "mend": "manage.py rebuildcounts"}
        )
    return "kept_counts", section
