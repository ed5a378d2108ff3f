"""The control loop, and the interface a kind of work implements to run on it."""

import contextlib
import logging
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Protocol

import psycopg
from django.db import connection

from jobs.runtime.database import DATABASE_ERRORS, error_extra, retry_delay, session_lock_take
from jobs.runtime.periodic import PeriodicRunner
from pipeline_project.db.connections import (
    LISTENER_CHECK_SEC,
    check_listener,
    connection_wait_left,
    end_connection_waits_at,
    interrupt_connection_wait,
    is_transient_error,
    listen_connection_params,
)
from pipeline_project.db.outages import OUTAGES

log = logging.getLogger("jobs.runtime")

FINISH_SEC = 3.0  # of the shutdown timeout, kept for the last writes (at most a quarter of it)
LISTEN_CONNECT_TIMEOUT_SEC = 10


class WorkSource(Protocol):
    """A kind of work the runtime serves: the job queue, a process namespace.

    Everything but ``start``/``stop`` and ``collect``/``pending`` runs on the control thread
    between waits, and may raise database errors (the runtime backs off and calls again).
    """

    channels: tuple[str, ...]  # LISTEN channels whose notifications this source takes

    @classmethod
    def build(cls, names: dict[str, int], setup) -> "WorkSource":
        """The source serving ``names`` (``{name: concurrency}`` of its kind) in the worker ``setup``
        describes (``jobs.runtime.registry.WorkerSetup``)."""

    def start(self, runtime: "Runtime") -> None:
        """Start its threads (lanes, recorder); ``runtime.wake()`` interrupts the loop's wait."""

    def stop(self) -> None:
        """Stop its threads (after :meth:`finish`)."""

    def recheck(self) -> None:
        """Notifications may have been missed (a new listener, the safety sweep): look everywhere."""

    def notified(self, channel: str, payload: str) -> None: ...

    def collect(self) -> None:
        """Book what other threads handed over (finished runs, written results); no database work."""

    def pending(self) -> bool:
        """Whether :meth:`collect` has something to book (then the loop does not sleep)."""

    def deadline(self, now: float, stopping: bool) -> float | None:
        """The monotonic time :meth:`step` next has something to do, if any."""

    def step(self, now: float, stopping: bool) -> None:
        """The small steps that are due: claim into free slots, renew leases, ... (no claims when stopping)."""

    def in_flight(self) -> int:
        """Runs claimed and not yet recorded."""

    def finish(self, release: bool) -> None:
        """Last writes before exiting: record what ended; with ``release``, give back what still runs."""


class Runtime:
    """Runs work sources until stopped, then drains: :meth:`run` returns within the shutdown
    timeout of the stop, whatever the database does. Runs in flight get that time less
    ``FINISH_SEC`` for the last writes (results, releases); from the stop on, no wait for a pooled
    connection outlasts their time (``databases.end_connection_waits_at``), and what could not be
    written then is left for its lease to expire.

    The loop waits on a wake-up pipe (other threads write to it) and one LISTEN connection
    for all sources' channels, never a busy poll; its timeout is the nearest deadline of any
    source, the safety sweep and the stop deadline. A database error anywhere in a pass
    closes the connections and backs off (0.5 s doubling to 5 s) before the next.
    """

    def __init__(
        self,
        sources: list[WorkSource],
        *,
        session: Callable[[], None],
        sweep_sec: float,
        shutdown_timeout_sec: float,
        periodic: PeriodicRunner | None = None,
        connect_listener: Callable[[], psycopg.Connection] | None = None,
    ):
        self.sources = sources
        self._session = session  # configures the control thread's connection
        self._sweep_sec = sweep_sec
        self._shutdown_timeout_sec = shutdown_timeout_sec
        self._periodic = periodic
        self._periodic_stop = threading.Event()
        self._connect_listener = connect_listener or listener_connect
        self._by_channel = {channel: source for source in sources for channel in source.channels}
        self._listener: psycopg.Connection | None = None
        self._notified = True  # the listener may have notifications to read (reading none is harmless)
        self._next_sweep = time.monotonic() + sweep_sec
        self._next_listener_check = time.monotonic() + LISTENER_CHECK_SEC
        self._stop_at: float | None = None  # when run() must have returned (set by the stop)
        self._work_until: float | None = None  # when runs still in flight are released
        self._retry_at = 0.0
        self._failures = 0
        self.stop_requested = threading.Event()
        self._stopping_logged = False
        self._threads_to_interrupt: list[int] = []  # the control loop's and the periodic tasks'
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._asleep = False
        self.sleeping_until = 0.0  # monotonic time the loop's current wait ends

    # --- lifecycle ------------------------------------------------------------------

    def run(self) -> None:
        self._threads_to_interrupt.append(threading.get_ident())
        for source in self.sources:
            source.start(self)
        periodic = None
        if self._periodic is not None:
            periodic = threading.Thread(
                target=self._periodic.run_until, args=(self._periodic_stop,), name="runtime-periodic", daemon=True
            )
            periodic.start()
            self._threads_to_interrupt.append(periodic.ident)
        try:
            while self.tick():
                pass
        finally:
            self._periodic_stop.set()
            if periodic is not None:  # a daemon thread: one the database holds is left behind
                periodic.join(timeout=self._time_left(10.0))
            for source in self.sources:
                source.stop()
            self._close_listener()
            connection.close()
            end_connection_waits_at(None)

    def request_stop(self) -> float:
        """Stop claiming; running work gets the shutdown timeout to finish (signal-safe). Returns
        the ``time.monotonic()`` by which :meth:`run` returns."""
        if self._stop_at is None:
            now = time.monotonic()
            self._stop_at = now + self._shutdown_timeout_sec
            self._work_until = self._stop_at - min(FINISH_SEC, self._shutdown_timeout_sec / 4)
            end_connection_waits_at(self._work_until)
            for thread_id in self._threads_to_interrupt:  # they have nothing to finish: no wait holds them
                interrupt_connection_wait(thread_id)
        self._periodic_stop.set()  # no periodic task starts any more
        self.stop_requested.set()
        self.wake()
        return self._stop_at

    def tick(self) -> bool:
        """One pass of the control loop; returns whether to keep going."""
        stopping = self.stop_requested.is_set()
        if stopping:
            if not self._stopping_logged:
                self._stopping_logged = True
                log.info("stop requested; waiting for running work", extra={"running": self._in_flight()})
            if not self._in_flight():
                return self._finish(release=False)
            if time.monotonic() >= self._work_until:
                return self._finish(release=True)

        self._wait(self._timeout(stopping))
        for source in self.sources:
            source.collect()
        if time.monotonic() < self._retry_at:
            return True
        try:
            self._ensure_connected()
            if self._notified:
                self._take_notifications()
            self._check_listener_if_due()
            self._sweep_if_due()
            now = time.monotonic()
            stopping = self.stop_requested.is_set()  # asked during the wait: claim nothing more
            for source in self.sources:
                source.step(now, stopping)
            self._failures = 0
            OUTAGES.answered()
        except DATABASE_ERRORS as exc:
            self._on_database_error(exc)
        return True

    def _in_flight(self) -> int:
        return sum(source.in_flight() for source in self.sources)

    def _finish(self, *, release: bool) -> bool:
        end_connection_waits_at(min(self._stop_at, time.monotonic() + FINISH_SEC))
        try:
            self._session()
            for source in self.sources:
                source.collect()  # runs that ended since the last pass go out with the last writes
                source.finish(release)
        except DATABASE_ERRORS as exc:
            log.error("could not finish cleanly; leases will expire and be reaped", extra=error_extra(exc))
        return False

    # --- waiting ----------------------------------------------------------------------

    def _timeout(self, stopping: bool) -> float:
        if any(source.pending() for source in self.sources):
            return 0.0
        now = time.monotonic()
        if self._listener is None and now >= self._retry_at:
            return 0.0  # not connected yet (or no longer): connect and look for work now
        deadlines = [self._next_sweep, self._next_listener_check]
        for source in self.sources:
            due = source.deadline(now, stopping)
            if due is not None:
                if due <= now:
                    return 0.0
                deadlines.append(due)
        if self._retry_at > now:
            deadlines.append(self._retry_at)
        if stopping:
            deadlines.append(self._work_until)
        return max(0.0, min(deadlines) - now)

    def _wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout``; note whether notifications arrived (a zero timeout only looks)."""
        readable = [self._wake_read]
        listener = self._listener.fileno() if self._listener is not None and not self._listener.closed else None
        if listener is not None:
            readable.append(listener)
        self.sleeping_until = time.monotonic() + timeout
        self._asleep = timeout > 0
        if self.stop_requested.is_set() or any(source.pending() for source in self.sources):
            timeout = 0.0  # handed over before or while _asleep was set: nothing wakes the loop for it
        ready = select.select(readable, [], [], timeout)[0]
        self._asleep = False
        if listener in ready:
            self._notified = True
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def wake(self) -> None:
        """Called from other threads: interrupt the control loop's wait (only if it waits)."""
        if self._asleep or self.stop_requested.is_set():
            with contextlib.suppress(BlockingIOError):  # the pipe is full: the loop is being woken anyway
                os.write(self._wake_write, b"\0")

    # --- notifications and connections ------------------------------------------------------

    def _ensure_connected(self) -> None:
        self._session()
        if self._listener is None or self._listener.closed:
            self._listener = self._connect_listener()
            for channel in self._by_channel:
                self._listener.execute(f"LISTEN {channel}")
            self._notified = True
            for source in self.sources:  # whatever happened while nobody listened
                source.recheck()

    def _take_notifications(self) -> None:
        self._notified = False
        for notify in self._listener.notifies(timeout=0):
            source = self._by_channel.get(notify.channel)
            if source is not None:
                source.notified(notify.channel, notify.payload)

    def _check_listener_if_due(self) -> None:
        """A dead LISTEN connection, or one left on a server that no longer takes writes (fenced
        read-only, demoted), raises here: it is then made again, on the primary."""
        now = time.monotonic()
        if now < self._next_listener_check:
            return
        self._next_listener_check = now + LISTENER_CHECK_SEC
        check_listener(self._listener)
        self._notified = True  # notifications that came with its answer wait to be read

    def _sweep_if_due(self) -> None:
        """The safety net for a lost notification: look everywhere now and then."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self._sweep_sec
        for source in self.sources:
            source.recheck()

    def _time_left(self, at_most: float) -> float:
        """``at_most`` seconds, or less if the stop's deadline comes sooner."""
        if self._stop_at is None:
            return at_most
        return max(0.0, min(at_most, self._stop_at - time.monotonic()))

    def _close_listener(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(psycopg.Error):
                self._listener.close()
            self._listener = None

    def _on_database_error(self, exc: Exception) -> None:
        self._failures += 1
        delay = retry_delay(self._failures)
        if is_transient_error(exc):
            OUTAGES.failed(exc, during="the control loop")
        else:  # a statement the database refuses: a bug to see, not an outage to wait out quietly
            log.error("a database statement failed; retrying", exc_info=exc, extra={"retry_in_sec": delay})
        self._close_listener()
        connection.close()
        self._retry_at = time.monotonic() + delay


def listener_connect(*, session_key: int | None = None) -> psycopg.Connection:
    """The loop's LISTEN connection; with ``session_key``, holding that advisory lock (a worker's:
    it says the worker lives)."""
    # A server that does not answer (a dead host drops packets) must not hold the loop, nor a stop.
    timeout = max(2, round(connection_wait_left(LISTEN_CONNECT_TIMEOUT_SEC)))
    conn = psycopg.connect(**listen_connection_params(), autocommit=True, connect_timeout=timeout)
    if session_key is not None:
        session_lock_take(conn, session_key)
    return conn
