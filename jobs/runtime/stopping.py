"""How a worker process stops: SIGTERM or SIGINT asks it to, and it is gone by the deadline the
stop sets, whatever the database does (a statement it never answers included): what could not be
released by then is left for its lease to expire, as after a kill. Its last steps (the apps'
``registry.at_exit`` hooks) run in what is left of that time."""

import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger("jobs.runtime")
EXIT_SEC = 10.0  # what the last steps get when the block ended without a stop (it raised)
EXIT_MARGIN_SEC = 0.25  # of the stop's deadline, kept for the process's own exit after them


@contextmanager
def stopping_on_signals(
    request_stop: Callable[[], float], *, at_exit: Callable[..., None] | None = None
) -> Iterator[None]:
    """Inside the block, SIGTERM or SIGINT calls ``request_stop()``, which returns the
    ``time.monotonic()`` by which the block must have ended; if it has not by then, the process
    exits at once. When the block ends (or raises), ``at_exit(deadline=)`` takes the process's
    last steps by that time (``EXIT_SEC`` from then without a stop), under the same watch."""
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
        try:
            if at_exit is not None:
                end = deadline[0] - EXIT_MARGIN_SEC if deadline else time.monotonic() + EXIT_SEC
                at_exit(deadline=end)
        finally:
            ended.set()
