"""How a worker process stops: SIGTERM or SIGINT asks it to, and it is gone by the deadline the
stop sets, whatever the database does (a statement it never answers included): what could not be
released by then is left for its lease to expire, as after a kill."""

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("jobs.runtime")


@contextmanager
def stopping_on_signals(request_stop: Callable[[], float]) -> Iterator[None]:
    """Inside the block, SIGTERM or SIGINT calls ``request_stop()``, which returns the
    ``time.monotonic()`` by which the block must have ended; if it has not by then, the process
    exits at once."""
    deadline: list[float] = []
    asked, ended = threading.Event(), threading.Event()

    def on_signal(*_args) -> None:
        if not deadline:
            deadline.append(request_stop())
            asked.set()

    def exit_by_deadline() -> None:
        asked.wait()
        if ended.wait(max(0.0, deadline[0] - time.monotonic())):
            return
        log.error("still running at the stop deadline (the database holds a statement); exiting now")
        logging.shutdown()
        os._exit(0)

    threading.Thread(target=exit_by_deadline, name="stop-deadline", daemon=True).start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)
    try:
        yield
    finally:
        ended.set()
