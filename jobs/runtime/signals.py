"""A run's stop signals as events, so a handler blocked in a subprocess or a socket can be interrupted."""

import subprocess
import threading
import time

POLL_SEC = 0.05  # how soon a killed-for subprocess notices a signal


class RunSignals:
    """Set from the control loop (another thread): the run was canceled, or its lease was lost.

    ``stopped`` is an event set by either, for a handler to wait on; ``canceled`` and
    ``lease_lost`` say which (both are set before the event, so a woken waiter sees why).
    """

    __slots__ = ("canceled", "lease_lost", "stopped")

    def __init__(self, *, cancel_requested: bool = False):
        self.canceled = cancel_requested
        self.lease_lost = False
        self.stopped = threading.Event()
        if cancel_requested:
            self.stopped.set()

    def request_cancel(self) -> None:
        self.canceled = True
        self.stopped.set()

    def lose_lease(self) -> None:
        self.lease_lost = True
        self.stopped.set()


def run_subprocess(args, *, signals: RunSignals, timeout: float | None = None, input=None, **popen_kwargs):
    """``subprocess.run`` that kills the child as soon as the run is canceled or loses its lease.

    Returns the ``CompletedProcess``; when a signal stopped the child, its ``returncode`` is
    whatever the kill left (the caller's ``check_cancelled()`` then says why). ``timeout``
    raises ``subprocess.TimeoutExpired`` as ``subprocess.run`` does. Output is collected with
    ``communicate``, so a chatty child never blocks on a full pipe.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    with subprocess.Popen(args, stdin=subprocess.PIPE if input is not None else None, **popen_kwargs) as process:
        pending_input = input
        while True:
            try:
                stdout, stderr = process.communicate(pending_input, timeout=POLL_SEC)
                return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
            except subprocess.TimeoutExpired:
                pending_input = None  # sent on the first call; a retry may not send it again
                if deadline is not None and time.monotonic() >= deadline:
                    process.kill()
                    process.communicate()
                    raise subprocess.TimeoutExpired(args, timeout) from None
                if signals.stopped.is_set():
                    process.kill()
                    stdout, stderr = process.communicate()
                    return subprocess.CompletedProcess(args, process.returncode, stdout, stderr)
