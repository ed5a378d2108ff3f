"""Lanes: a named pool of handler threads with a fixed number of slots."""

import logging
import threading
import time
from collections.abc import Callable
from queue import SimpleQueue
from typing import Generic, TypeVar

from pipeline_project.databases import release_connections

log = logging.getLogger("jobs.runtime")

Run = TypeVar("Run")
Outcome = TypeVar("Outcome")


class Lane(Generic[Run, Outcome]):
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
        self._work: SimpleQueue = SimpleQueue()

    @property
    def free(self) -> int:
        return self.concurrency - self.executing

    def start(self) -> None:
        for index in range(self.concurrency):
            threading.Thread(target=self._loop, name=f"{self._thread_prefix}-{index}", daemon=True).start()

    def stop(self) -> None:
        """Let every thread end once the runs queued before this are done."""
        for _ in range(self.concurrency):
            self._work.put(None)

    def submit(self, run: Run) -> None:
        """Take a slot and run ``run`` in it (control thread)."""
        self.executing += 1
        self._work.put(run)

    def release(self) -> None:
        """Free a slot (control thread)."""
        self.executing -= 1
        if self.freed_at is None:
            self.freed_at = time.monotonic()

    def _loop(self) -> None:
        while (run := self._work.get()) is not None:
            while run is not None:  # a run, then the runs its report hands on to this slot
                try:
                    outcome = self._execute(run)
                except BaseException as exc:
                    log.exception("a run ended without an outcome; failing it", extra={"lane": self.name})
                    outcome = self._crashed(run, exc)
                self._release_connections()  # a slot holds a pooled connection only while it uses it
                run = self._report(run, outcome)
                self._release_connections()

    def _release_connections(self) -> None:
        try:
            release_connections()
        except BaseException:
            log.exception("could not give a handler's connections back", extra={"lane": self.name})
