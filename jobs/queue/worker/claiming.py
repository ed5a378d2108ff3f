"""Claiming into the lanes' free slots, on the control thread (``jobs.queue.worker.source``).

Each pass of the control loop claims, for every queue that may have work and whose lane has room
(its free slots, and more ahead of them while its runs are short: ``Claimer.ahead``), up
to ``claim_batch`` jobs in one statement: a limited queue within its limits
(``jobs.queue.worker.limits``), any other from its claim floor (``jobs.queue.worker.floors``),
every claim inside ``LostClaims.claiming`` (``jobs.queue.worker.lost_claims``). A short batch
says the queue has nothing more claimable now: it is not claimed again until something says it
may have work (a NOTIFY, a job of it ending, the safety sweep, an alarm, the timer for the next
job's ``available_at``, which no NOTIFY marks).
"""

import logging
import time

from django.db import IntegrityError
from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.states import JobStatus
from jobs.queue.worker import metrics
from jobs.queue.worker.floors import ClaimFloors
from jobs.queue.worker.limits import LimitedQueues
from jobs.queue.worker.lost_claims import LostClaims
from jobs.queue.worker.runs import JobRun
from jobs.runtime.database import DATABASE_ERRORS
from pipeline_project.db.connections import is_transient_error

log = logging.getLogger("jobs.queue.worker.source")

# The most a lane claims ahead, in lanes: should the jobs it holds turn out long (the runs before
# them were short), each of its threads has at most this many to get through (Celery's default
# prefetch multiplier is the same, and holds them whatever their runs take).
AHEAD_LANES = 4


class Claimer:
    """What to claim, when, and claiming it. The control thread's: it alone calls it and owns every
    field here (``running`` and ``meters`` are the source's, the control thread's too)."""

    def __init__(
        self,
        *,
        queues: dict[str, int],
        lanes: dict,
        clocks,
        worker_name: str,
        running: dict,
        meters: metrics.QueueMeters,
        limited: LimitedQueues,
        floors: ClaimFloors,
        lost_claims: LostClaims,
    ):
        self.queues = queues
        self._lanes, self._clocks, self._worker_name = lanes, clocks, worker_name
        self._running, self._meters = running, meters  # claimed runs are booked into them
        self._limited, self._floors, self._lost_claims = limited, floors, lost_claims
        self.may_have_work = dict.fromkeys(queues, True)
        self._next_available: float | None = None
        self._reschedule = False  # a job went back to its queue with a delay: re-read the timer

    # --- what may have work ----------------------------------------------------------------

    def recheck(self) -> None:
        self.may_have_work = dict.fromkeys(self.queues, True)
        self._limited.refresh_soon()

    def notified(self, queue: str) -> None:
        if queue in self.may_have_work:
            self.may_have_work[queue] = True

    def ended(self, queue: str, status: str | None) -> None:
        """A job of ``queue`` ended (its new ``status``; None: its lease was gone or lost)."""
        # The next job of its lock_key, if any, is claimable now (and the budget of a limited queue freed).
        self.may_have_work[queue] = True
        self._limited.ended(queue)
        if status == JobStatus.QUEUED:
            self._reschedule = True  # retried after a backoff: no NOTIFY will say when

    def deadlines(self) -> list[float]:
        """When the next claims are due (the loop is not stopping)."""
        deadlines = [
            due
            for queue in self.queues
            if self.may_have_work[queue] and (due := self.due_at(queue, ahead=self.ahead(queue))) is not None
        ]
        if self._next_available is not None:
            deadlines.append(self._next_available)
        deadlines.extend(self._limited.retry_deadlines())
        deadlines.extend(self._floors.alarms.deadlines())
        return deadlines

    def due_at(self, queue: str, *, ahead: int) -> float | None:
        """When to claim for a queue with room (None: no room: no free slot, nothing to claim ahead).
        ``ahead``: what a claim takes beyond the free slots (``Claimer.ahead``).

        Like Nagle's algorithm: while other jobs of the queue still run, a claim waits up to
        ``claim_coalesce_sec`` for room for half of what the lane may hold (its slots and what
        it claims ahead), so short jobs are claimed in full batches rather than one statement
        per freed slot. An idle queue claims at once.
        """
        lane = self._lanes[queue]
        room = lane.free + ahead
        if room <= 0:
            return None
        if lane.executing == 0 or room * 2 >= lane.concurrency + ahead or lane.freed_at is None:
            return 0.0
        return lane.freed_at + self._clocks.claim_coalesce_sec

    def ahead(self, queue: str) -> int:
        """How many jobs a claim of ``queue`` takes beyond its lane's free slots: while its runs are
        short, as many as the lane runs in ``claim_ahead_run_sec``, at most ``AHEAD_LANES`` times
        its slots and ``claim_batch``.

        Why: a claim's round trip (a millisecond or two on a busy server) leaves every slot of a
        lane of short jobs idle until it returns, and every claim statement costs the server about
        as much as its first dozen jobs. Jobs claimed ahead wait in the lane for a slot, in claim
        order, none for longer than about ``claim_ahead_run_sec``; they hold their leases (renewed
        with the others) and lock_keys meanwhile, like running jobs. Never in a limited queue,
        whose budget is of jobs running: there a claim takes its free slots only.
        """
        within = self._clocks.claim_ahead_run_sec
        if within <= 0 or queue in self._limited:
            return 0
        lane = self._lanes[queue]
        run_sec = lane.short_run_sec(within, time.monotonic())
        if run_sec is None:
            return 0
        most = min(self._clocks.claim_batch, AHEAD_LANES * lane.concurrency)
        return most if run_sec == 0 else min(most, int(lane.concurrency * within / run_sec))

    # --- the timer for the next available_at ------------------------------------------------

    def reschedule_if_asked(self) -> None:
        """Re-read the timer if a job went back to its queue with a delay; recheck once it went off."""
        if self._reschedule:
            self._reschedule = False
            self._schedule_next_available()
        self._wake_for_scheduled_jobs()

    def _wake_for_scheduled_jobs(self) -> None:
        """The timer for the next available_at (no NOTIFY fires when a delay runs out)."""
        if self._next_available is not None and time.monotonic() >= self._next_available:
            self._next_available = None
            self.recheck()

    def _schedule_next_available(self, *, due_since_sec: float = 0.0) -> None:
        """Set the timer to the earliest future available_at in our queues (none fires a NOTIFY),
        counting jobs that came due in the last ``due_since_sec`` (after the claim that found none)."""
        soonest = selectors.next_available_at(queues=list(self.queues), due_since_sec=due_since_sec)
        self._next_available = (
            None if soonest is None else time.monotonic() + max(0.0, (soonest - timezone.now()).total_seconds())
        )

    # --- claiming ---------------------------------------------------------------------------

    def claim(self, now: float) -> None:
        """Claim into the free slots of every queue that may have work and is due (``now``: the pass's)."""
        woken = self._limited.before_claims(now) + self._floors.alarms.due(now)
        self.may_have_work.update(dict.fromkeys(woken, True))
        drained = False
        now = time.monotonic()  # before the claims: their statements' now() is later
        for queue, lane in self._lanes.items():
            ahead = self.ahead(queue)  # once: due_at's room is the claim's
            due = self.due_at(queue, ahead=ahead)
            if not self.may_have_work[queue] or due is None or due > now:
                continue
            drained |= self._claim_queue(queue, lane, now, limit=min(lane.free + ahead, self._clocks.claim_batch))
        if drained:
            self._schedule_next_available(due_since_sec=time.monotonic() - now)

    def _claim_queue(self, queue: str, lane, now: float, *, limit: int) -> bool:
        """One claim of up to ``limit`` jobs of ``queue`` into ``lane``; returns whether it came up short."""
        lane.freed_at = None
        floor = self._floors.floor(queue, now)
        started = time.monotonic()
        try:
            with self._lost_claims.claiming():  # booked below, on this thread, before any settle
                claim = self._limited.claim(queue=queue, limit=limit, worker_id=self._worker_name, floor=floor)
        except DATABASE_ERRORS as exc:
            if isinstance(exc, IntegrityError) and services.is_lock_key_race(exc):
                # Another queue's worker took a job with the same lock_key at the same moment: claim again.
                metrics.CLAIM_RACES.labels(queue=queue).inc()
                return False
            if is_transient_error(exc) or not self._set_aside_unclaimable(queue, limit):
                raise
            return False
        ended = time.monotonic()
        self._floors.claimed(queue, floor=floor, window_head=claim.window_head, seconds=ended - started, now=ended)
        jobs = claim.jobs
        for job in jobs:
            running = JobRun.claimed(job, worker_name=self._worker_name, clocks=self._clocks)
            self._running[job.lease.job_id] = running
            lane.submit(running)
        self._meters.claimed[queue].inc(len(jobs))
        self._meters.running[queue].set(lane.executing)
        # A short batch: nothing more is claimable in this queue now. Jobs waiting on a busy
        # lock_key become claimable when it frees: a NOTIFY (or our own recording) says so.
        if len(jobs) < limit:
            self.may_have_work[queue] = False
            self._limited.came_up_short(queue)
            return True
        return False

    def _set_aside_unclaimable(self, queue: str, limit: int) -> bool:
        """After a claim the database refused: fail the jobs it refuses, so the rest can run."""
        refused = services.jobs_set_aside_unclaimable(queue=queue, limit=limit, worker_id=self._worker_name)
        if refused:
            extra = {"queue": queue, "job_ids": [str(job_id) for job_id in refused]}
            log.error("failed jobs the database refuses to claim", extra=extra)
            metrics.SET_ASIDE.labels(queue=queue).inc(len(refused))
        return bool(refused)
