"""Helpers for tests that need what the ORM hides: extra connections and threads."""

import threading
from contextlib import contextmanager

import psycopg
from django.db import connections

from pipeline_project.db.connections import connection_params
from pipeline_project.db.urls import database_url


def raw_connection(alias: str = "default", **kwargs) -> psycopg.Connection:
    """A separate psycopg connection to the (test) database behind ``alias``."""
    return psycopg.connect(**connection_params(alias), **kwargs)


def run_in_threads(count: int, target, *args) -> list:
    """Start ``count`` threads that call ``target(index, *args)`` at the same moment.

    Each thread closes its own Django connections when done. Exceptions are re-raised.
    """
    barrier = threading.Barrier(count)
    results: list = [None] * count
    errors: list = []

    def run(index: int) -> None:
        try:
            barrier.wait()
            results[index] = target(index, *args)
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def subprocess_database_env() -> dict[str, str]:
    """Environment that points a subprocess (runworker, manage.py) at the test databases."""
    return {
        "DATABASE_URL": database_url(connection_params("default")),
        "PIPELINE_DATABASE_URL": database_url(connection_params("pipeline")),
    }


@contextmanager
def listening(alias: str, channel: str):
    """LISTEN on a second connection; yields ``received()``: payloads that arrived (waits briefly)."""
    with raw_connection(alias, autocommit=True) as conn:
        conn.execute(f"LISTEN {channel}")

        def received(timeout: float = 0.3) -> list[str]:
            return sorted(notify.payload for notify in conn.notifies(timeout=timeout, stop_after=10_000))

        yield received


# Tables a test's teardown never empties: what migrate wrote and no test changes (the operator
# groups and their permissions among them).
KEPT_TABLES = frozenset(
    {"django_migrations", "django_content_type", "auth_permission", "auth_group", "auth_group_permissions"}
)
_written_tables_sql: dict[str, str] = {}


def empty_written_tables(test_case) -> None:
    """``TransactionTestCase._fixture_teardown``, cheaper: empty only the tables the test wrote
    (one statement finds them), and keep the content types and permissions, so that nothing has
    to be made again (Django's flush truncates every table, then rebuilds those: ~0.3 s a test)."""
    for alias in test_case._databases_names(include_mirrors=False):
        connection = connections[alias]
        if alias not in _written_tables_sql:
            tables = sorted(
                set(connection.introspection.django_table_names(only_existing=True, include_views=False)) - KEPT_TABLES
            )
            quoted = [connection.ops.quote_name(table) for table in tables]
            _written_tables_sql[alias] = " UNION ALL ".join(
                f"SELECT '{name}' WHERE EXISTS (SELECT FROM {name})" for name in quoted
            )
        with connection.cursor() as cursor:
            cursor.execute(_written_tables_sql[alias])
            written = [row[0] for row in cursor.fetchall()]
            if written:
                cursor.execute(f"TRUNCATE {', '.join(written)} CASCADE")
