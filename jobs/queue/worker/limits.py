"""What a worker (``jobs.queue.worker.source.QueueSource``) knows of its queues' limits (``Queue.max_running``,
``rate_limit``), and how it claims from them.

A limited queue is claimed by ``jobs_claim_limited`` (the database enforces the limits, whatever
the worker knows), any other by the ordinary claim, which takes nothing from a limited queue: a
worker that has not heard of a new limit yet claims nothing there, never too much. The worker
reads its queues' limits at start, again when they change (``QUEUES_CHANNEL``) and at every safety
sweep (a missed notification). Nothing tells a worker when a limited queue's budget frees — a job
of it ends on another worker, its rate period moves on — so workers announce the ends of limited
queues' jobs (a NOTIFY, only for those queues), and a limited queue that came up short while jobs
wait is tried again after a short delay: its rate period divided by its rate, at most
``MAX_RETRY_SEC`` (an idle queue is not polled: inserts NOTIFY).
"""

import time

from jobs.queue import selectors, services
from jobs.queue.models import Queue
from jobs.queue.worker.alarms import QueueAlarms

MIN_RETRY_SEC = 0.02
MAX_RETRY_SEC = 1.0


class LimitedQueues:
    """The control thread's (it alone writes); handler threads only ask ``queue in limited``."""

    def __init__(self, queues):
        self.queues = list(queues)
        self.limits: dict[str, Queue] = {}  # read by handler threads: replaced, never changed
        self._stale = True
        self._retries = QueueAlarms()  # a short limited queue is claimed again
        self._ended: set[str] = set()  # limited queues whose jobs ended since the last announcement

    def __contains__(self, queue: str) -> bool:
        return queue in self.limits

    def refresh_soon(self) -> None:
        self._stale = True

    def _refresh_if_stale(self) -> None:
        if self._stale:
            self.limits = selectors.queue_limits(queues=self.queues)
            self._stale = False

    def claim(self, *, queue: str, limit: int, worker_id: str, floor: services.ClaimFloor | None) -> services.Claim:
        """Claim from ``queue``: within its limits, if it has any (always from its head), else from ``floor``."""
        if queue in self.limits:
            return services.Claim(jobs=services.jobs_claim_limited(queue=queue, limit=limit, worker_id=worker_id))
        return services.jobs_claim_from(queue=queue, limit=limit, worker_id=worker_id, floor=floor)

    def came_up_short(self, queue: str) -> None:
        """A claim took fewer jobs than asked: if the queue is limited and jobs wait, its budget is why."""
        limits = self.limits.get(queue)
        if limits is not None and selectors.queue_has_available_jobs(queue=queue):
            delay = MAX_RETRY_SEC if limits.rate_limit is None else limits.rate_period_sec / limits.rate_limit
            self._retries.set(queue, time.monotonic() + min(MAX_RETRY_SEC, max(MIN_RETRY_SEC, delay)))

    def retry_deadlines(self) -> list[float]:
        return self._retries.deadlines()

    def before_claims(self, now: float) -> list[str]:
        """Before the control loop's claims: read changed limits, announce ended jobs, and return
        the limited queues to claim from again now."""
        self._refresh_if_stale()
        self._announce_ended()
        return self._retries.due(now)

    def ended(self, queue: str) -> None:
        """A job of ``queue`` ended (control thread)."""
        if queue in self.limits:
            self._ended.add(queue)

    def _announce_ended(self) -> None:
        """Tell every worker which limited queues had jobs end (their budget may let a job start)."""
        if self._ended:
            services.queues_wake(queues=sorted(self._ended))
            self._ended.clear()
