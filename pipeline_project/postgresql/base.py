"""Django's PostgreSQL backend with every connection taken from the process's bounded pool.

Each process (a web worker, a runworker, a command) holds at most ``DB_POOL_SIZE`` connections
per database, however many threads it runs: a thread borrows one when it first queries and
gives it back when its connection is closed (the end of a request, of a run in a lane). A
thread that finds none free waits (``DB_POOL_TIMEOUT_SEC`` at most), and the wait is measured:
``db_pool_wait_seconds``. A stopping process cuts every wait short
(``databases.end_connection_waits_at``): a database that is gone cannot hold its exit.
"""

import time

import psycopg
from django.db.backends.postgresql import base
from prometheus_client import Histogram
from psycopg_pool import ConnectionPool, PoolTimeout

from pipeline_project.databases import connection_wait_cut, connection_wait_left, connection_wait_started

POOL_WAIT = Histogram(
    "db_pool_wait_seconds",
    "Time a thread waited for a connection from its process's pool.",
    ["database"],
    buckets=(0.0005, 0.002, 0.01, 0.05, 0.25, 1, 5, 30),
)
# A long wait is taken in slices this long, so that a stop arriving meanwhile ends it.
WAIT_SLICE_SEC = 0.2
MIN_WAIT_SEC = 0.001


class WaitCut(PoolTimeout):
    """A wait for a connection that a stop ended."""


class StoppablePool(ConnectionPool):
    """A pool whose waits end early when the process stops (``databases.end_connection_waits_at``,
    ``interrupt_connection_wait``)."""

    def getconn(self, timeout: float | None = None):
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        connection_wait_started()
        while True:
            left = connection_wait_left(deadline - time.monotonic())
            try:  # never 0: psycopg_pool would not even lend an idle connection
                return super().getconn(max(min(left, WAIT_SLICE_SEC), MIN_WAIT_SEC))
            except PoolTimeout:
                if connection_wait_cut():
                    raise WaitCut("the process is stopping: it waits no longer for a connection") from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {timeout:.2f} sec") from None


class DatabaseWrapper(base.DatabaseWrapper):
    @property
    def pool(self):
        options = self.settings_dict["OPTIONS"].get("pool")
        if options and self.alias not in self._connection_pools:
            # Django's own pool, made of the class above: as Django builds it (opened on first use).
            check = ConnectionPool.check_connection if self.settings_dict["CONN_HEALTH_CHECKS"] else None
            created = StoppablePool(
                kwargs={**self.get_connection_params(), "autocommit": True},
                open=False,
                configure=self._configure_connection,
                **{"check": check, **options},
            )
            self._connection_pools.setdefault(self.alias, created)
        return super().pool

    def get_new_connection(self, conn_params):
        started = time.perf_counter()
        try:
            connection = super().get_new_connection(conn_params)
        except PoolTimeout as exc:
            if not isinstance(exc, WaitCut):
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
