"""The job queue as a work source of the runtime (``jobs.runtime``), serving WORKERS_JSON's
``{"queue": NAME, "concurrency": N}`` entries. Each pass of the control loop, :class:`QueueSource`
hands finished runs to the recorder; claims up to the free slots of every queue that may have
work (one statement per queue; NOTIFY on ``dl_jobs`` says a queue has work, ``dl_jobs_cancel``
names a job to cancel); renews each lease every min(``DL_HEARTBEAT_SEC``, TTL / 3), leases due
together in one statement; and wakes for the next job's ``available_at`` (no NOTIFY fires then).

Each queue is a lane of handler threads. The recorder writes finished runs on its own connection,
as many per statement as have finished since its last write (``jobs.queue.worker.results``), so recording
overlaps claiming. Until a run is recorded its job is still ``running`` in the database: its lease
is renewed with the others, and claims leave jobs with its lock_key alone. When a finished run's
lock_key has a job waiting, its handler thread writes the result and claims the next job in one
statement, and runs it in the same slot. Limited queues are claimed apart: ``jobs.queue.worker.limits``.

The worker's own statements commit asynchronously (``DL_WORKER_SYNCHRONOUS_COMMIT``): a database
crash can lose the last few hundred milliseconds of claims and results, which only means those
jobs run again (at-least-once); producers insert jobs with synchronous commits: none is lost.
"""

import logging
import os
import socket
import time
import uuid
from collections import deque

from django.db import IntegrityError
from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.handlers import Registry
from jobs.queue.models import CANCEL_CHANNEL, NOTIFY_CHANNEL, QUEUES_CHANNEL
from jobs.queue.worker import metrics
from jobs.queue.worker.clocks import QueueClocks
from jobs.queue.worker.execution import failure_outcome, run_handler
from jobs.queue.worker.floors import ClaimFloors
from jobs.queue.worker.limits import LimitedQueues
from jobs.queue.worker.lost_claims import LostClaims
from jobs.queue.worker.results import ResultWriter
from jobs.queue.worker.runs import Running
from jobs.runtime.config import WorkerConfig
from jobs.runtime.database import DATABASE_ERRORS, error_extra, use_generic_plans
from jobs.runtime.lanes import Lane
from jobs.runtime.loop import Runtime
from jobs.runtime.names import worker_name
from jobs.runtime.recorder import Recorder
from jobs.runtime.registry import WorkerSetup, work_source
from pipeline_project.db.connections import is_transient_error

log = logging.getLogger("jobs.queue.worker.source")


@work_source("queue")
class QueueSource:
    """The job queue on the runtime: claims, lanes per queue, results, leases."""

    channels = (NOTIFY_CHANNEL, CANCEL_CHANNEL, QUEUES_CHANNEL)

    @classmethod
    def build(cls, queues: dict[str, int], setup: WorkerSetup) -> "QueueSource":
        return cls(setup.config, setup.handlers, worker_id=setup.worker_id)  # queues: the configuration's

    @staticmethod
    def name_problem(name: str) -> str | None:
        return services.text_field_problem("queue", name)

    def __init__(self, config: WorkerConfig, registry: Registry, *, worker_id: uuid.UUID | None = None):
        self.queues = config.served("queue")
        self.clocks = config.settings_of(QueueClocks)
        self.synchronous_commit = config.synchronous_commit
        self.registry = registry
        self.worker_id = worker_id or uuid.uuid4()
        self.worker_name = worker_name(self.worker_id)
        writer = ResultWriter(worker_name=self.worker_name, synchronous_commit=self.synchronous_commit)
        self.recorder: Recorder[Running] = Recorder(
            name="job-recorder",
            write=writer.write,
            on_recorded=self._on_recorded,
            linger_sec=self.clocks.record_linger_sec,
        )
        self.lanes = {
            queue: Lane(
                queue,
                concurrency,
                execute=self._execute,
                crashed=self._crashed,
                report=self._hand_off,
                thread_prefix=f"job-{queue}",
            )
            for queue, concurrency in self.queues.items()
        }
        self.runtime: Runtime | None = None

        # Control thread only.
        self._running: dict[uuid.UUID, Running] = {}  # claimed and not yet recorded
        # Per-queue metric children, looked up once: labels() is not free at thousands of jobs a second.
        self._claimed_counter = {queue: metrics.CLAIMED.labels(queue=queue) for queue in self.queues}
        self._running_gauge = {queue: metrics.RUNNING.labels(queue=queue) for queue in self.queues}
        self._may_have_work = dict.fromkeys(self.queues, True)
        self._limited = LimitedQueues(self.queues)  # claimed within their limits (``jobs.queue.worker.limits``)
        self._floors = ClaimFloors(
            claim_floor_after_sec=self.clocks.claim_floor_after_sec
        )  # ``jobs.queue.worker.floors``
        self._lost_claims = LostClaims(worker_name=self.worker_name)  # ``jobs.queue.worker.lost_claims``
        self._registered = False
        self._next_heartbeat = time.monotonic() + self.clocks.heartbeat_sec
        self._next_available: float | None = None
        self._reschedule = False  # a job went back to its queue with a delay: re-read the timer

        # Handed over by other threads (deque appends and pops are atomic).
        self._finished: deque[Running] = deque()
        self._recorded: deque[tuple[Running, str | None]] = deque()
        self._handed: deque[tuple[Running, str | None, Running | None]] = deque()  # runs handed on by handler threads

    # --- the runtime's interface ------------------------------------------------------

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        for lane in self.lanes.values():
            lane.start()
        self.recorder.start()
        log.info("worker starting", extra={"worker": self.worker_name, "queues": self.queues})

    def stop(self) -> None:
        self.recorder.stop()
        for lane in self.lanes.values():
            lane.stop()
        log.info("worker stopped", extra={"worker": self.worker_name})

    def recheck(self) -> None:
        self._may_have_work = dict.fromkeys(self.queues, True)
        self._limited.refresh_soon()

    def notified(self, channel: str, payload: str) -> None:
        if channel == NOTIFY_CHANNEL:
            if payload in self._may_have_work:
                self._may_have_work[payload] = True
        elif channel == QUEUES_CHANNEL:
            self._limited.refresh_soon()
        else:
            running = self._running.get(_as_uuid(payload))
            if running is not None:
                running.context.mark_cancel_requested()

    def pending(self) -> bool:
        return bool(self._finished or self._recorded or self._handed)

    def deadline(self, now: float, stopping: bool) -> float | None:
        deadlines = [self._next_heartbeat]
        if not stopping:
            deadlines.extend(
                due
                for queue in self.queues
                if self._may_have_work[queue] and (due := self._claim_due_at(queue)) is not None
            )
            if self._next_available is not None:
                deadlines.append(self._next_available)
            deadlines.extend(self._limited.retry_deadlines())
            deadlines.extend(self._floors.alarms.deadlines())
        if self._running:
            deadlines.append(min(running.renew_from for running in self._running.values()))
        return min(deadlines)

    def step(self, now: float, stopping: bool) -> None:
        self._register()
        self._give_back_lost_claims()
        if self._reschedule:
            self._reschedule = False
            self._schedule_next_available()
        self._wake_for_scheduled_jobs()
        if not stopping:
            woken = self._limited.before_claims(now) + self._floors.alarms.due(now)
            self._may_have_work.update(dict.fromkeys(woken, True))
            self._claim()
        self._heartbeat_if_due()

    def in_flight(self) -> int:
        return len(self._running)

    def finish(self, release: bool) -> None:
        """Record what ended, release what still runs (with ``release``), deregister."""
        self.recorder.flush()
        self._book_recorded()  # no pass of the loop follows: the runs just written end here
        if release:
            executing = [running for running in self._running.values() if not running.finished]
            for running in executing:
                running.context.mark_lease_lost()  # its thread may not write any more
            leases = [running.context.job.lease for running in executing]
            released = services.jobs_release(leases=leases, worker_id=self.worker_name, reason="worker_shutdown")
            log.warning("shutdown timeout: released running jobs", extra={"released": released})
        if self._registered:
            services.worker_deregister(worker_id=self.worker_id)

    # --- claiming -----------------------------------------------------------------------

    def _register(self) -> None:
        if not self._registered:
            services.worker_register(
                worker_id=self.worker_id, hostname=socket.gethostname(), pid=os.getpid(), queues=self.queues
            )
            self._registered = True

    def _wake_for_scheduled_jobs(self) -> None:
        """The timer for the next available_at (no NOTIFY fires when a delay runs out)."""
        if self._next_available is not None and time.monotonic() >= self._next_available:
            self._next_available = None
            self.recheck()

    def _claim_due_at(self, queue: str) -> float | None:
        """When to claim for a queue with free slots (None: no free slot).

        Like Nagle's algorithm: while other jobs of the queue still run, a claim waits up to
        ``claim_coalesce_sec`` for half the slots to be free, so short jobs are claimed in
        full batches rather than one statement per freed slot. An idle queue claims at once.
        """
        lane = self.lanes[queue]
        if lane.free <= 0:
            return None
        if lane.executing == 0 or lane.free * 2 >= lane.concurrency or lane.freed_at is None:
            return 0.0
        return lane.freed_at + self.clocks.claim_coalesce_sec

    def _claim(self) -> None:
        drained = False
        now = time.monotonic()  # before the claims: their statements' now() is later
        for queue, lane in self.lanes.items():
            due = self._claim_due_at(queue)
            if not self._may_have_work[queue] or due is None or due > now:
                continue
            free = min(lane.free, self.clocks.claim_batch)
            lane.freed_at = None
            floor = self._floors.floor(queue, now)
            started = time.monotonic()
            try:
                with self._lost_claims.claiming():  # booked below, on this thread, before any settle
                    claim = self._limited.claim(queue=queue, limit=free, worker_id=self.worker_name, floor=floor)
            except DATABASE_ERRORS as exc:
                if isinstance(exc, IntegrityError) and services.is_lock_key_race(exc):
                    # Another queue's worker took a job with the same lock_key at the same moment: claim again.
                    metrics.CLAIM_RACES.labels(queue=queue).inc()
                    continue
                if is_transient_error(exc) or not self._set_aside_unclaimable(queue, free):
                    raise
                continue
            ended = time.monotonic()
            self._floors.claimed(queue, floor=floor, window_head=claim.window_head, seconds=ended - started, now=ended)
            jobs = claim.jobs
            for job in jobs:
                running = Running.claimed(job, worker_name=self.worker_name, clocks=self.clocks)
                self._running[job.lease.job_id] = running
                lane.submit(running)
            self._claimed_counter[queue].inc(len(jobs))
            self._running_gauge[queue].set(lane.executing)
            # A short batch: nothing more is claimable in this queue now. Jobs waiting on a busy
            # lock_key become claimable when it frees: a NOTIFY (or our own recording) says so.
            if len(jobs) < free:
                self._may_have_work[queue] = False
                self._limited.came_up_short(queue)
                drained = True
        if drained:
            self._schedule_next_available(due_since_sec=time.monotonic() - now)

    def _give_back_lost_claims(self) -> None:
        """After a claim whose answer may have been lost, give back the jobs it took (``jobs.queue.worker.lost_claims``)."""
        released = self._lost_claims.settle(booked=self._booked)
        if released:
            log.info("gave back jobs whose claim's answer was lost", extra={"released": released})
            self.recheck()

    def _booked(self) -> set[uuid.UUID]:
        """The jobs this worker holds: running, or handed on to a slot and not yet in ``_running``."""
        return set(self._running) | {successor.context.job_id for _, _, successor in self._handed if successor}

    def _set_aside_unclaimable(self, queue: str, limit: int) -> bool:
        """After a claim the database refused: fail the jobs it refuses, so the rest can run."""
        refused = services.jobs_set_aside_unclaimable(queue=queue, limit=limit, worker_id=self.worker_name)
        if refused:
            extra = {"queue": queue, "job_ids": [str(job_id) for job_id in refused]}
            log.error("failed jobs the database refuses to claim", extra=extra)
            metrics.SET_ASIDE.labels(queue=queue).inc(len(refused))
        return bool(refused)

    def _schedule_next_available(self, *, due_since_sec: float = 0.0) -> None:
        """Set the timer to the earliest future available_at in our queues (none fires a NOTIFY),
        counting jobs that came due in the last ``due_since_sec`` (after the claim that found none)."""
        soonest = selectors.next_available_at(queues=list(self.queues), due_since_sec=due_since_sec)
        self._next_available = (
            None if soonest is None else time.monotonic() + max(0.0, (soonest - timezone.now()).total_seconds())
        )

    # --- running (handler threads) ------------------------------------------------------

    def _execute(self, running: Running) -> services.Outcome | None:
        """Run one job (``jobs.queue.handlers.run_handler``); None when the lease was lost."""
        return run_handler(self.registry, running.context, retry_backoff_sec=self.clocks.retry_backoff_sec)

    @staticmethod
    def _crashed(running: Running, exc: BaseException) -> services.Outcome:
        """A bug of ours, not the handler's, ended the run: it fails, and its slot is freed."""
        return failure_outcome(running.context.job, exc, kind="fatal", started=running.started)

    def _hand_off(self, running: Running, outcome: services.Outcome | None) -> Running | None:
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
                    worker_id=self.worker_name,
                    synchronous_commit=self.synchronous_commit,
                    floor=self._floors.floor(job.queue, time.monotonic()),
                )
                successor = (
                    Running.claimed(claimed, worker_name=self.worker_name, clocks=self.clocks) if claimed else None
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

    # --- results ------------------------------------------------------------------------

    def collect(self) -> None:
        """Free the slots of finished runs, hand their results to the recorder, forget recorded
        ones, and book the runs that handler threads handed on to the next job of their key."""
        to_record, freed = [], set()
        while self._finished:
            running = self._finished.popleft()
            queue = running.context.job.queue
            running.finished = True
            self.lanes[queue].release()
            freed.add(queue)
            if running.outcome is None:
                self._forget(running, None)
            else:
                to_record.append(running)
        if to_record:
            self.recorder.submit(to_record)
        while self._handed:
            running, status, successor = self._handed.popleft()
            running.finished = True
            queue = running.context.job.queue
            self._forget(running, status)
            if successor is None:
                self.lanes[queue].release()
                freed.add(queue)
            else:  # it runs in the slot its predecessor held
                self._running[successor.context.job_id] = successor
                self._claimed_counter[queue].inc()
        self._book_recorded()
        for queue in freed:
            self._running_gauge[queue].set(self.lanes[queue].executing)

    def _book_recorded(self) -> None:
        while self._recorded:
            self._forget(*self._recorded.popleft())

    def _forget(self, running: Running, status: str | None) -> None:
        """A run that ended: its outcome written (``status``: the job's new status; None: its lease
        was gone, reaped or reset) or its lease lost in the run (no outcome). Logged here, once."""
        job = running.context.job
        self._running.pop(job.lease.job_id, None)
        # The next job of its lock_key, if any, is claimable now (and the budget of a limited queue freed).
        self._may_have_work[job.queue] = True
        self._limited.ended(job.queue)
        metrics.record_outcome(
            queue=job.queue, task=job.task, status=status, seconds=time.perf_counter() - running.started
        )
        if status == "queued":
            self._reschedule = True  # retried after a backoff: no NOTIFY will say when
        running.log_end(status)

    def _on_recorded(self, results: list[tuple[Running, str | None]]) -> None:
        """Called by the recorder (any thread) once results are written."""
        self._recorded.extend(results)
        if self.runtime is not None:
            self.runtime.wake()

    # --- leases -------------------------------------------------------------------------

    def _heartbeat_if_due(self) -> None:
        """Renew the leases that are due (each every min(heartbeat, TTL / 3), early ones batched
        with them), and the worker's own row every heartbeat period."""
        now = time.monotonic()
        due = [running for running in self._running.values() if running.renew_from <= now]
        if due:
            held = services.jobs_heartbeat(
                leases=[running.context.job.lease for running in due], worker_id=self.worker_name
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
            self._next_heartbeat = now + self.clocks.heartbeat_sec
            services.worker_heartbeat(worker_id=self.worker_id, running_jobs=len(self._running))


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
