"""Lanes: a named pool of handler threads with a fixed number of slots."""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable

from pipeline_project.db.connections import release_connections

log = logging.getLogger("jobs.runtime")

RUN_TIME_WEIGHT = 0.1  # of the latest run in the moving average of run times: about the last ten runs


class Lane[Run, Outcome]:
    """``concurrency`` threads running one kind of work, and the slots they run it in.

    A thread holds a database connection only while a run (or its report) uses one: it gives
    it back to the process's pool after each, so a lane's connections are bounded by the
    pool (``DB_POOL_SIZE``), not by its slots.

    The control thread owns the slot accounting (:meth:`submit` takes a slot, :meth:`release`
    frees one). A handler thread runs each run with ``execute(run) -> outcome``; whatever that
    raises, even ``BaseException`` (``SystemExit``, ``KeyboardInterrupt`` in a thread), becomes
    the outcome ``crashed(run, exc)``, so every run ends with an outcome and no slot is lost.
    ``report(run, outcome)`` then hands the outcome on and may return the next run for the
    same slot (it then runs at once, on this thread, without a hop through the control loop).

    Waking a thread costs a context switch, so a submitted run wakes one only when no thread is
    already on its way to the queue; a thread that takes a run and sees more waiting wakes the
    next. Short runs are then taken by the few threads that are awake, and runs that block still
    each get a thread of their own, one wake-up after another.

    More runs than slots may be submitted: they wait in the queue for a thread. The lane keeps how
    long its runs take (:meth:`short_run_sec`), for a source that submits ahead of free slots only
    while runs are short, and no more than the lane runs in a short time.
    """

    def __init__(
        self,
        name: str,
        concurrency: int,
        *,
        execute: Callable[[Run], Outcome],
        crashed: Callable[[Run, BaseException], Outcome],
        report: Callable[[Run, Outcome], Run | None],
        thread_prefix: str,
    ):
        self.name = name
        self.concurrency = concurrency
        self.executing = 0  # slots in use (control thread only)
        self.freed_at: float | None = None  # when a slot first came free since the last claim
        self._execute, self._crashed, self._report = execute, crashed, report
        self._thread_prefix = thread_prefix
        self._mutex = threading.Lock()  # guards the fields below
        self._work: deque = deque()  # runs submitted and not yet taken; None tells a thread to end
        self._parked: list[threading.Lock] = []  # held locks of the threads waiting for work
        self._waking = 0  # threads woken that have not looked at the queue yet
        self._run_sec: float | None = None  # a moving average of how long runs took
        self._last_end = 0.0  # monotonic time the last run ended

    @property
    def free(self) -> int:
        return self.concurrency - self.executing

    def start(self) -> None:
        for index in range(self.concurrency):
            threading.Thread(target=self._loop, name=f"{self._thread_prefix}-{index}", daemon=True).start()

    def stop(self) -> None:
        """Let every thread end once the runs queued before this are done."""
        with self._mutex:
            self._work.extend([None] * self.concurrency)
            while self._parked:
                self._wake_one()

    def submit(self, run: Run) -> None:
        """Take a slot and run ``run`` in it (control thread)."""
        self.executing += 1
        with self._mutex:
            self._work.append(run)
            if not self._waking and self._parked:
                self._wake_one()

    def short_run_sec(self, within: float, now: float) -> float | None:
        """How long runs take on average, if under ``within`` seconds and one ended in the last
        ``within`` (None otherwise: a lane whose every thread is held by a long run, or that ran
        nothing lately, has no short runs to tell of)."""
        with self._mutex:
            if self._run_sec is not None and self._run_sec < within and now - self._last_end < within:
                return self._run_sec
            return None

    def _ran(self, started: float) -> None:
        ended = time.monotonic()
        with self._mutex:
            took = ended - started
            self._run_sec = took if self._run_sec is None else self._run_sec + RUN_TIME_WEIGHT * (took - self._run_sec)
            self._last_end = ended

    def _wake_one(self) -> None:
        self._waking += 1
        self._parked.pop().release()

    def release(self) -> None:
        """Free a slot (control thread)."""
        self.executing -= 1
        if self.freed_at is None:
            self.freed_at = time.monotonic()

    def _take(self, wake: threading.Lock):
        """The next run (None: end), waiting for one with ``wake`` held."""
        woken = False
        while True:
            with self._mutex:
                self._waking -= woken
                if self._work:
                    run = self._work.popleft()
                    if self._work and not self._waking and self._parked:
                        self._wake_one()  # more wait: they may block, so another thread comes for them
                    return run
                self._parked.append(wake)
            wake.acquire()  # released by the thread that wakes this one
            woken = True

    def _loop(self) -> None:
        wake = threading.Lock()
        wake.acquire()
        while (run := self._take(wake)) is not None:
            while run is not None:  # a run, then the runs its report hands on to this slot
                started = time.monotonic()
                try:
                    outcome = self._execute(run)
                except BaseException as exc:
                    log.exception("a run ended without an outcome; failing it", extra={"lane": self.name})
                    outcome = self._crashed(run, exc)
                self._ran(started)
                self._release_connections()  # a slot holds a pooled connection only while it uses it
                run = self._report(run, outcome)
                self._release_connections()

    def _release_connections(self) -> None:
        try:
            release_connections()
        except BaseException:
            log.exception("could not give a handler's connections back", extra={"lane": self.name})
