"""A run's stop signals as events, so a handler blocked in a subprocess or a socket can be interrupted."""

import threading


class RunSignals:
    """Set from the control loop (another thread): the run was canceled, or its lease was lost.

    ``stopped`` is an event set by either, for a handler to wait on (or to hand to
    ``jobs.runtime.subprocesses``, which kills a child on it); ``canceled`` and ``lease_lost``
    say which (both are set before the event, so a woken waiter sees why).
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
