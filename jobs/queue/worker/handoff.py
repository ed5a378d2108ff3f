"""What the handler threads of the queue's lanes run: a job's handler, and handing its run on.

A run that ended goes to the control loop (the ``finished`` deque), which frees its slot and
passes it to the recorder, which batches results. But when a job of its lock_key waits (in a queue
without limits), the handler thread writes the result and, in the same statement, claims the
queue's first claimable job, which runs in the same slot at once (the ``handed`` deque tells the
control loop): one statement between a key's jobs, no hop between threads.
"""

import logging
import time
from collections import deque

from jobs.queue import services
from jobs.queue.handlers import Registry
from jobs.queue.states import OutcomeKind
from jobs.queue.worker.execution import failure_outcome, run_handler
from jobs.queue.worker.floors import ClaimFloors
from jobs.queue.worker.limits import LimitedQueues
from jobs.queue.worker.lost_claims import LostClaims
from jobs.queue.worker.runs import JobRun
from jobs.runtime.database import DATABASE_ERRORS, error_extra, use_generic_plans
from jobs.runtime.loop import Runtime
from pipeline_project.db.connections import is_transient_error

log = logging.getLogger("jobs.queue.worker.source")


class HandOff:
    """The lanes' ``execute``, ``crashed`` and ``report``, called on the handler threads.

    Its fields are set before the threads start and never written again; the threads only read
    them, and what they read of the control thread's (``limited``'s limits, ``floors``' floors) is
    replaced there, never changed in place. A thread writes only the run it holds (``outcome``,
    ``written_in_doubt``: it owns the run until it appends it to ``finished`` or ``handed``), the
    successor it claims, and those two deques (appends; the control thread pops).
    """

    def __init__(
        self,
        *,
        registry: Registry,
        clocks,
        worker_name: str,
        synchronous_commit: str,
        limited: LimitedQueues,
        floors: ClaimFloors,
        lost_claims: LostClaims,
        finished: deque,
        handed: deque,
    ):
        self._registry, self._clocks = registry, clocks
        self._worker_name, self._synchronous_commit = worker_name, synchronous_commit
        self._limited, self._floors, self._lost_claims = limited, floors, lost_claims
        self._finished, self._handed = finished, handed
        self.runtime: Runtime | None = None  # set by QueueSource.start, before the lanes start

    def execute(self, running: JobRun) -> services.Outcome | None:
        """Run one job (``jobs.queue.handlers.run_handler``); None when the lease was lost."""
        return run_handler(self._registry, running.context, retry_backoff_sec=self._clocks.retry_backoff_sec)

    @staticmethod
    def crashed(running: JobRun, exc: BaseException) -> services.Outcome:
        """A bug of ours, not the handler's, ended the run: it fails, and its slot is freed."""
        return failure_outcome(running.context.job, exc, kind=OutcomeKind.FATAL, started=running.started)

    def hand_off(self, running: JobRun, outcome: services.Outcome | None) -> JobRun | None:
        """Report a finished run; return the next run for this slot, if any.

        Usually the run goes to the control loop and the recorder, which batch results. But when a
        job of its lock_key waits (in a queue without limits), this thread writes the result and, in
        the same statement, claims the queue's first claimable job (that one, unless another is due
        first), which runs here at once: one statement between a key's jobs, no hop between threads.
        """
        running.outcome = outcome
        job = running.context.job
        limited = job.queue in self._limited
        if outcome is None or not job.has_successor or limited or self.runtime.stop_requested.is_set():
            self._finished.append(running)
            self.runtime.wake()
            return None
        try:
            with self._lost_claims.claiming():  # the successor is booked (handed on) within
                use_generic_plans()  # planning the statement would be most of its cost
                status, claimed = services.job_complete_and_claim(
                    outcome=outcome,
                    queue=job.queue,
                    worker_id=self._worker_name,
                    synchronous_commit=self._synchronous_commit,
                    floor=self._floors.floor(job.queue, time.monotonic()),
                )
                successor = (
                    JobRun.claimed(claimed, worker_name=self._worker_name, clocks=self._clocks) if claimed else None
                )
                self._handed.append((running, status, successor))
        except DATABASE_ERRORS as exc:  # the recorder writes it instead, with its retries and fallbacks
            log.warning("could not hand the slot on; the recorder writes the result", extra=error_extra(exc))
            running.written_in_doubt = is_transient_error(exc)
            self._finished.append(running)
            self.runtime.wake()
            return None
        # The books can wait for the loop's next pass, unless a slot came free to claim into or the
        # successor's lease is due for renewal before then.
        if successor is None or successor.renew_from < self.runtime.sleeping_until:
            self.runtime.wake()
        return successor
