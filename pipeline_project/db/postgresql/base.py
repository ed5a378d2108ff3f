"""Django's PostgreSQL backend with every connection taken from the process's bounded pool.

Each process (a web worker, a runworker, a command) holds at most ``DB_POOL_SIZE`` connections
per database, however many threads it runs: a thread borrows one when it first queries and
gives it back when its connection is closed (the end of a request, of a run in a lane). A
thread that finds none free waits (``DB_POOL_TIMEOUT_SEC`` at most), and the wait is measured:
``db_pool_wait_seconds``. A stopping process cuts every wait short
(``databases.end_connection_waits_at``): a database that is gone cannot hold its exit.

While the database refuses connections (down, restarting, its slots full), a thread that would
wait for one is told at once if the pool has none lent, after REFUSED_WAIT_SEC if it has (an
``OperationalError`` naming the cause: the API answers 503 and the worker retries), and the pool
tries to reconnect every half second, not at doubling intervals: it is back within a second of
the database.
"""

import threading
import time

import psycopg
from django.db.backends.postgresql import base
from prometheus_client import Histogram
from psycopg_pool import ConnectionPool, PoolTimeout
from psycopg_pool.base import AttemptWithBackoff

from pipeline_project.db.connections import connection_wait_cut, connection_wait_left, connection_wait_started

POOL_WAIT = Histogram(
    "db_pool_wait_seconds",
    "Time a thread waited for a connection from its process's pool.",
    ["database"],
    buckets=(0.0005, 0.002, 0.01, 0.05, 0.25, 1, 5, 30),
)
# A long wait is taken in slices this long, so that a stop arriving meanwhile ends it.
WAIT_SLICE_SEC = 0.2
MIN_WAIT_SEC = 0.001
# While the database refuses new connections, a thread waits this long for a lent one to come back
# (a request's, a run's): some never do (a worker's control loop and recorder keep theirs).
REFUSED_WAIT_SEC = 1.0


class WaitCut(PoolTimeout):
    """A wait for a connection that a stop ended."""


class SteadyReconnect(AttemptWithBackoff):
    """Reconnection attempts every half second (psycopg_pool doubles the interval: after a minute's
    outage it would reconnect half a minute after the database is back)."""

    INITIAL_DELAY = 0.5
    DELAY_BACKOFF = 1.0


class StoppablePool(ConnectionPool):
    """A pool whose waits end early when the process stops (``databases.end_connection_waits_at``,
    ``interrupt_connection_wait``) or when the database refuses connections."""

    # Why the last attempt to connect failed, until one succeeds. (The two methods below hook into
    # psycopg_pool's internals: the version is pinned, and tests/db cover both behaviours.)
    refused: psycopg.Error | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._lent_lock = threading.Lock()
        self._lent = 0  # connections out with threads: while some are, a waiter may get one back

    def _connect(self, timeout: float | None = None):
        try:
            conn = super()._connect(timeout)
        except psycopg.Error as exc:
            self.refused = exc
            raise
        self.refused = None
        return conn

    def _add_connection(self, attempt: AttemptWithBackoff | None, growing: bool = False) -> None:
        super()._add_connection(attempt or SteadyReconnect(timeout=self.reconnect_timeout), growing)

    def getconn(self, timeout: float | None = None):
        timeout = self.timeout if timeout is None else timeout
        started = time.monotonic()
        deadline = started + timeout
        connection_wait_started()
        while True:
            left = connection_wait_left(deadline - time.monotonic())
            try:  # never 0: psycopg_pool would not even lend an idle connection
                conn = super().getconn(max(min(left, WAIT_SLICE_SEC), MIN_WAIT_SEC))
            except PoolTimeout:
                if connection_wait_cut():
                    raise WaitCut("the process is stopping: it waits no longer for a connection") from None
                if self.refused is not None and (not self._lent or time.monotonic() - started >= REFUSED_WAIT_SEC):
                    raise psycopg.OperationalError(f"the database refuses connections: {self.refused}") from None
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"couldn't get a connection after {timeout:.2f} sec") from None
            else:
                with self._lent_lock:
                    self._lent += 1
                return conn

    def putconn(self, conn) -> None:
        with self._lent_lock:
            self._lent -= 1
        super().putconn(conn)


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
