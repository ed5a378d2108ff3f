"""Plain psycopg access to the project's databases, beside Django's connections."""

from urllib.parse import quote

import psycopg
from psycopg import sql

# Django passes these to psycopg.connect for its own cursors; a plain connection must not get them.
_DJANGO_ONLY_PARAMS = ("cursor_factory", "context")


def connection_params(alias: str = "default") -> dict:
    """psycopg.connect() keyword arguments for a Django database alias (test databases included)."""
    from django.db import connections

    params = connections[alias].get_connection_params()
    for key in _DJANGO_ONLY_PARAMS:
        params.pop(key, None)
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
