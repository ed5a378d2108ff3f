"""A database outage in a process's log: one line when it begins, one when it ends."""

import logging
import threading
import time

from pipeline_project.db.storable import first_line

# An outage ends once the database has answered for this long without a failure: the kills of a
# flapping network or a pg_terminate_backend storm are one episode, not one per connection.
OUTAGE_QUIET_SEC = 10

log = logging.getLogger("pipeline_project.db")


class Outages:
    """One warning when the database becomes unavailable (with its cause) and one line when it is
    back (with how long and how many failures), whatever number of threads and retries met it in
    between: a worker's control loop, recorder and periodic tasks, a web process's requests."""

    def __init__(self):
        self._lock = threading.Lock()
        self._started: float | None = None
        self._last_failure = 0.0
        self._failures = 0

    def failed(self, exc: BaseException, *, during: str) -> None:
        now = time.monotonic()
        with self._lock:
            first = self._started is None
            if first:
                self._started, self._failures = now, 0
            self._failures += 1
            self._last_failure = now
        if first:
            log.warning(
                "database unavailable; retrying until it answers", extra={"error": first_line(exc), "during": during}
            )

    def answered(self) -> None:
        if self._started is None:  # the common case, without the lock
            return
        now = time.monotonic()
        with self._lock:
            if self._started is None or now - self._last_failure < OUTAGE_QUIET_SEC:
                return
            started, failures, self._started = self._started, self._failures, None
        log.info(
            "database available again",
            extra={"unavailable_sec": round(self._last_failure - started, 1), "failures": failures},
        )


OUTAGES = Outages()
