"""Renewing a worker's leases and its own row, on the control thread (``jobs.queue.worker.source``).

Each lease is renewed every min(``DL_HEARTBEAT_SEC``, TTL / 3), leases due within a quarter of
their interval renewed with those due now, in one statement; a renewal learns whether the lease is
still held and whether the job's cancellation was asked for. The worker's row beats every
heartbeat period.
"""

import time
import uuid

from jobs.queue import services
from jobs.queue.worker.runs import JobRun


class LeaseRenewals:
    """The control thread's: it owns ``_next_heartbeat`` and each run's ``renew_at`` (``running``
    is the source's, the control thread's too)."""

    def __init__(self, *, running: dict[uuid.UUID, JobRun], clocks, worker_id: uuid.UUID, worker_name: str):
        self._running, self._clocks = running, clocks
        self._worker_id, self._worker_name = worker_id, worker_name
        self._next_heartbeat = time.monotonic() + clocks.heartbeat_sec

    def deadlines(self) -> list[float]:
        """When a renewal is next due: the worker's row's, and the first lease's, if any."""
        if self._running:
            return [self._next_heartbeat, min(running.renew_from for running in self._running.values())]
        return [self._next_heartbeat]

    def renew_if_due(self) -> None:
        """Renew the leases that are due (each every min(heartbeat, TTL / 3), early ones batched
        with them), and the worker's own row every heartbeat period."""
        now = time.monotonic()
        due = [running for running in self._running.values() if running.renew_from <= now]
        if due:
            held = services.jobs_heartbeat(
                leases=[running.context.job.lease for running in due], worker_id=self._worker_name
            )
            for running in due:
                running.renew_at = now + running.renew_every
                if running.context.job_id not in held:
                    # Still running (it may be running elsewhere too): say so now. A run with an
                    # outcome learns from its write whether the lease was gone or the write ended it.
                    if running.outcome is None:
                        running.log_lease_lost()
                    running.context.mark_lease_lost()
                elif held[running.context.job_id]:
                    running.context.mark_cancel_requested()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self._clocks.heartbeat_sec
            services.worker_heartbeat(worker_id=self._worker_id, running_jobs=len(self._running))
