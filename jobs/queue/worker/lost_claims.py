"""Claims whose answer was lost: the claim committed, then the connection broke before its answer
came back (the pooler or the server restarted, the backend was killed). The database holds those
jobs as running under this worker, and nobody renews their leases: they would wait out their TTL
and then be picked a second time. After a claim fails that way, the worker asks the database which
running jobs it was given last, and gives back those it does not hold. They never ran, so each
gets its attempt back, and the journal says ``claim_lost``.

The guarantee: a job the worker holds, or is about to hold, is never given back. Every claim
runs inside :meth:`LostClaims.claiming`, whose body ends once the claimed jobs are booked.
:meth:`LostClaims.settle` reads the database first and compares afterwards, at a moment when no
claim is in flight. Any claim that committed before that read has left its body by then, so its
jobs are booked, unless its answer was lost.
"""

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from jobs.queue import selectors, services
from jobs.runtime.database import DATABASE_ERRORS
from pipeline_project.db.connections import is_transient_error


class LostClaims:
    """One worker's claims in doubt, and giving back what they took."""

    def __init__(self, *, worker_name: str):
        self.worker_name = worker_name
        # Every claiming thread (the control thread, handler threads handing a slot on) writes both
        # fields below, the control thread's settle too: they are written only under this lock.
        self._lock = threading.Lock()
        self._in_flight = 0  # claims between their statement and the booking of its jobs
        self._in_doubt = False  # a claim failed on a broken connection since the last settle

    @contextmanager
    def claiming(self) -> Iterator[None]:
        """Around a claim statement and the booking of the jobs it returns (any thread)."""
        with self._lock:
            self._in_flight += 1
        in_doubt = False
        try:
            yield
        except DATABASE_ERRORS as exc:
            in_doubt = is_transient_error(exc)
            raise
        finally:
            with self._lock:
                self._in_flight -= 1
                self._in_doubt |= in_doubt

    def settle(self, *, booked: Callable[[], set[uuid.UUID]]) -> int:
        """After a claim in doubt, give back the running jobs this worker was given last and does
        not hold (``booked``, called while no claim is in flight); return how many."""
        if not self._in_doubt:  # a read without the lock: a claim failing now is settled next time
            return 0
        with self._lock:
            self._in_doubt = False  # a claim that fails from here on is in doubt again
        try:
            return self._give_back(booked)
        except DATABASE_ERRORS:
            with self._lock:
                self._in_doubt = True
            raise

    def _give_back(self, booked: Callable[[], set[uuid.UUID]]) -> int:
        picked = selectors.running_leases_picked_by(worker=self.worker_name)
        with self._lock:
            if self._in_flight:  # its answer may be on its way: the next pass settles
                self._in_doubt = True
                return 0
            held = booked()
        lost = [lease for lease in picked if lease.job_id not in held]
        return services.jobs_release(leases=lost, worker_id=self.worker_name, reason="claim_lost") if lost else 0
