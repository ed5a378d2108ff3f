"""Plain psycopg access to the project's databases, beside Django's connections."""

from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

# SQLSTATE classes of errors that pass: connection (08), transaction rollback (40: deadlock,
# serialization), insufficient resources (53), operator intervention (57: shutdown, cancel),
# system (58). Others (22 data, 23 integrity, 54 program limit, 42 ...) refuse the statement itself.
TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})

# Django passes these to psycopg.connect for its own cursors; a plain connection must not get them.
_DJANGO_ONLY_PARAMS = ("cursor_factory", "context")
# What names the server, database and role of a connection (the rest are options of the session).
_TARGET_PARAMS = frozenset({"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "service"})


def connection_params(alias: str = "default") -> dict:
    """psycopg.connect() keyword arguments for a Django database alias (test databases included)."""
    from django.db import connections

    params = connections[alias].get_connection_params()
    for key in _DJANGO_ONLY_PARAMS:
        params.pop(key, None)
    return params


def listen_connection_params() -> dict:
    """psycopg.connect() keyword arguments for a connection that LISTENs on the default database:
    ``DB_LISTEN_URL`` if set (behind a transaction pooler, a direct connection: the pooler would
    hand the LISTEN's session to other clients), else the default database's. The URL names the
    whole target (nothing of the pooler's host, port or role is kept); the rest (application
    name, encoding, no prepared statements) is the default database's."""
    from django.conf import settings

    params = connection_params("default")
    if settings.DB_LISTEN_URL:
        params = {key: value for key, value in params.items() if key not in _TARGET_PARAMS}
        params.update(conninfo_to_dict(settings.DB_LISTEN_URL))
    return params


def ensure_databases(*, params: dict, names: tuple[str, ...]) -> None:
    """Create each database in ``names`` on the server ``params`` point at, if missing (safe to race)."""
    with psycopg.connect(**{**params, "dbname": "postgres", "autocommit": True}) as conn:
        existing = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        for name in names:
            if name in existing:
                continue
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
                pass  # another process created it first


def database_url(params: dict) -> str:
    """A DATABASE_URL for psycopg.connect() parameters (a socket directory as host included)."""
    host = quote(params.get("host") or "localhost", safe="")
    port = f":{params['port']}" if params.get("port") else ""
    password = f":{quote(params['password'], safe='')}" if params.get("password") else ""
    return f"postgres://{params.get('user') or 'postgres'}{password}@{host}{port}/{params['dbname']}"


def is_transient_error(exc: BaseException) -> bool:
    """Whether a database error may pass if the statement is tried again later (a restart, a
    dropped connection), as opposed to a refusal of the statement's data."""
    from django.db import InterfaceError, OperationalError

    if isinstance(exc, (InterfaceError, psycopg.InterfaceError)):
        return True
    cause = exc if isinstance(exc, psycopg.Error) else exc.__cause__
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:  # no answer from the server at all: the connection failed
        return isinstance(exc, (OperationalError, psycopg.OperationalError))
    return sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES


def close_broken_connections() -> None:
    """Close this thread's Django connections that a caller left unusable: an open transaction,
    autocommit turned off, or an error since the last commit on a connection that no longer
    answers. Unlike ``close_old_connections`` it does not make the next use of a healthy
    connection pay a health-check round trip (a worker calls it after every job)."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.in_atomic_block or conn.get_autocommit() != conn.settings_dict["AUTOCOMMIT"]:
            conn.close()
        elif conn.errors_occurred:
            if conn.is_usable():
                conn.errors_occurred = False
            else:
                conn.close()
