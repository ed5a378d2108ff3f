"""Helpers for tests that need what the ORM hides: extra connections and threads."""

import threading
from contextlib import contextmanager

import psycopg
from django.db import connections

from pipeline_project.databases import connection_params, database_url


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
