"""Django's PostgreSQL backend with every connection taken from the process's bounded pool.

Each process (a web worker, a runworker, a command) holds at most ``DB_POOL_SIZE`` connections
per database, however many threads it runs: a thread borrows one when it first queries and
gives it back when its connection is closed (the end of a request, of a run in a lane). A
thread that finds none free waits (``DB_POOL_TIMEOUT_SEC`` at most), and the wait is measured:
``db_pool_wait_seconds``.
"""

import time

import psycopg
from django.db.backends.postgresql import base
from prometheus_client import Histogram
from psycopg_pool import PoolTimeout

POOL_WAIT = Histogram(
    "db_pool_wait_seconds",
    "Time a thread waited for a connection from its process's pool.",
    ["database"],
    buckets=(0.0005, 0.002, 0.01, 0.05, 0.25, 1, 5, 30),
)


class DatabaseWrapper(base.DatabaseWrapper):
    def get_new_connection(self, conn_params):
        started = time.perf_counter()
        try:
            connection = super().get_new_connection(conn_params)
        except PoolTimeout as exc:
            self._raise_connect_error(conn_params, exc)
            raise
        POOL_WAIT.labels(database=self.alias).observe(time.perf_counter() - started)
        return connection

    def _raise_connect_error(self, conn_params, timeout: PoolTimeout) -> None:
        """The pool only says it waited in vain, whether all its connections were busy or none could
        be opened (no such database, server down, bad password): one direct attempt names the cause."""
        try:
            psycopg.connect(**{**conn_params, "connect_timeout": 5}).close()
        except psycopg.Error as exc:
            raise psycopg.OperationalError(f"{timeout}: {exc}") from exc
