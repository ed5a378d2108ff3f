"""The batch recorder: writes finished runs on its own thread and connection, many per statement."""

import logging
import threading
from collections.abc import Callable

from django.db import connection

from jobs.runtime.database import DATABASE_ERRORS, error_extra, retry_delay
from pipeline_project.db.connections import is_transient_error
from pipeline_project.db.outages import OUTAGES

log = logging.getLogger("jobs.runtime")


class Recorder[Item]:
    """Collects finished runs and writes them in batches, overlapping the control loop's work.

    ``write(batch, recorded)`` writes a batch and appends ``(item, status)`` to ``recorded``
    for each item it wrote, as it goes; it must raise on a transient database error (a
    restart), after which the unwritten items are put back and retried with backoff: results
    wait until they can be written, and a dead recorder never strands them.
    ``on_recorded(recorded)`` hears of every item written.
    """

    def __init__(
        self,
        *,
        name: str,
        write: Callable[[list[Item], list], None],
        on_recorded: Callable[[list], None],
        linger_sec: float,
    ):
        self._write, self._on_recorded, self._linger_sec = write, on_recorded, linger_sec
        self._pending: list[Item] = []
        self._lock = threading.Lock()  # guards _pending
        self._flushing = threading.Lock()  # one write at a time
        self._has_work = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, items: list[Item]) -> None:
        with self._lock:
            self._pending.extend(items)
        self._has_work.set()

    def stop(self) -> None:
        self._stopped.set()
        self._has_work.set()
        self._thread.join(timeout=10)

    def flush(self) -> None:
        """Write everything pending now; on an error, put back what was not written and raise."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            recorded: list = []
            try:
                self._write(batch, recorded)
            except BaseException:
                written = {id(item) for item, _status in recorded}
                with self._lock:
                    self._pending[:0] = [item for item in batch if id(item) not in written]
                raise
            finally:
                if recorded:
                    self._on_recorded(recorded)

    def _loop(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            self._has_work.wait()
            # Let a few more runs finish: one statement for many is much cheaper than many for one.
            self._stopped.wait(self._linger_sec)
            self._has_work.clear()
            try:
                self.flush()
                failures = 0
                OUTAGES.answered()
            except Exception as exc:  # the results are kept; a dead recorder would strand them
                failures += 1
                if not isinstance(exc, DATABASE_ERRORS):
                    log.exception("recording results failed; retrying")
                elif is_transient_error(exc):
                    OUTAGES.failed(exc, during="recording results")
                else:
                    log.warning("could not record results; retrying", extra=error_extra(exc))
                connection.close()
                self._stopped.wait(retry_delay(failures))
                self._has_work.set()
        connection.close()
