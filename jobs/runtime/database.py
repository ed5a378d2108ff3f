"""The runtime's connection settings and database-error helpers, shared by every work source."""

import threading

import psycopg
from django.conf import settings
from django.db import DatabaseError, connection

from jobs.services import first_line

DATABASE_ERRORS = (DatabaseError, psycopg.Error)

_session = threading.local()


def configure_session(synchronous_commit: str) -> None:
    """Session settings for the runtime's own connections (handlers' connections keep the defaults).

    ``plan_cache_mode``: with an unknown LIMIT the generic plan of a claim looks costly, so
    PostgreSQL would plan every execution anew (half the claim's time); the generic plan is
    in fact the same index walk. ``jit``: that same cost estimate grows with the table and,
    on servers built with JIT, would make PostgreSQL compile the claim on every execution.
    Behind a transaction pooler a session setting would leak to other clients, so there the
    database role should carry these settings instead (see the README).
    """
    if settings.DB_BEHIND_POOLER:
        return
    connection.ensure_connection()
    raw = connection.connection
    if getattr(_session, "configured", None) is not raw:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('synchronous_commit', %s, false), "
                "set_config('plan_cache_mode', 'force_generic_plan', false), set_config('jit', 'off', false)",
                [synchronous_commit],
            )
        _session.configured = raw


def error_extra(exc: BaseException, **extra) -> dict:
    """Log extras for a database error."""
    return {"error": first_line(exc), **{key: str(value) for key, value in extra.items()}}
