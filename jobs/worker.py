"""The runworker process: a control loop, a recorder, and handler threads per queue.

The control loop (main thread) waits and then does the small steps that are due
(:meth:`Worker.tick`):

- wait on the LISTEN connection and a wake-up pipe (never a busy poll): NOTIFY on
  ``dl_jobs`` says a queue has work, ``dl_jobs_cancel`` names a job to cancel, handler
  threads and the recorder write to the pipe; the timeout is the nearest of the next
  heartbeat, the next job's ``available_at`` and a slow safety sweep;
- hand finished runs to the recorder, and claim up to the free capacity of every queue
  that may have work (one statement per queue);
- renew every lease in one statement every ``DL_HEARTBEAT_SEC``.

Housekeeping (expired leases, retention) runs on a thread of its own (``jobs.periodic``).

The recorder thread writes finished runs on its own connection, as many per statement
as have finished since its last write, so recording overlaps claiming. Until a run is
recorded its job is still ``running`` in the database: its lease is renewed with the
others, and claims leave jobs with its lock_key alone rather than bounce them.

The worker's own statements commit asynchronously (``DL_WORKER_SYNCHRONOUS_COMMIT``):
a database crash can lose the last few hundred milliseconds of claims and results,
which only means those jobs run again (at-least-once); jobs themselves are inserted by
producers with synchronous commits and are never lost. Database errors (a restart, a
dropped connection) are retried with backoff; results wait until they can be written.
"""

import json
import logging
import os
import re
import select
import socket
import threading
import time
import traceback
import uuid
from collections import deque
from dataclasses import dataclass
from queue import SimpleQueue

import psycopg
from django.conf import settings
from django.db import DatabaseError, IntegrityError, connection
from django.utils import timezone

from jobs import metrics, selectors, services
from jobs.models import CANCEL_CHANNEL, NOTIFY_CHANNEL
from jobs.periodic import PeriodicRunner, queue_tasks
from jobs.registry import FatalError, JobCancelled, JobContext, LeaseLost, Registry
from pipeline_project.core.storable import json_problem, storable_text
from pipeline_project.databases import close_broken_connections, connection_params, is_transient_error

log = logging.getLogger("jobs.worker")

DATABASE_ERRORS = (DatabaseError, psycopg.Error)


@dataclass(frozen=True)
class WorkerConfig:
    queues: dict[str, int]  # queue -> concurrency
    heartbeat_sec: float
    retry_backoff_sec: float
    sweep_sec: float
    shutdown_timeout_sec: float
    claim_batch: int
    claim_coalesce_sec: float
    record_linger_sec: float
    progress_interval_sec: float
    synchronous_commit: str
    run_reaper: bool
    reaper_period_sec: float
    retention_period_sec: float
    retention_age_sec: float
    retention_max_identical: int

    @classmethod
    def from_settings(cls, queues: dict[str, int], **overrides) -> "WorkerConfig":
        values = {
            "queues": queues,
            "heartbeat_sec": settings.DL_HEARTBEAT_SEC,
            "retry_backoff_sec": settings.DL_RETRY_BACKOFF_SEC,
            "sweep_sec": settings.DL_SWEEP_SEC,
            "shutdown_timeout_sec": settings.DL_SHUTDOWN_TIMEOUT_SEC,
            "claim_batch": settings.DL_CLAIM_BATCH,
            "claim_coalesce_sec": settings.DL_CLAIM_COALESCE_SEC,
            "record_linger_sec": settings.DL_RECORD_LINGER_SEC,
            "progress_interval_sec": settings.DL_PROGRESS_INTERVAL_SEC,
            "synchronous_commit": settings.DL_WORKER_SYNCHRONOUS_COMMIT,
            "run_reaper": True,
            "reaper_period_sec": settings.DL_REAPER_PERIOD_SEC,
            "retention_period_sec": settings.DL_RETENTION_PERIOD_SEC,
            "retention_age_sec": settings.DL_RETENTION_AGE_SEC,
            "retention_max_identical": settings.DL_RETENTION_MAX_IDENTICAL,
        }
        return cls(**{**values, **overrides})


_session = threading.local()


def configure_session(synchronous_commit: str) -> None:
    """Session settings for the worker's own connections (handlers' connections keep the defaults).

    ``plan_cache_mode``: with an unknown LIMIT the generic plan of the claim looks costly, so
    PostgreSQL would plan every execution anew (half the claim's time); the generic plan is
    in fact the same index walk. ``jit``: that same cost estimate grows with the table and,
    on servers built with JIT, would make PostgreSQL compile the claim on every execution.
    Behind a transaction pooler a session setting would leak to other clients, so there the
    database role should carry these settings instead (see the README).
    """
    if settings.DB_BEHIND_POOLER:
        return
    connection.ensure_connection()
    raw = connection.connection
    if getattr(_session, "configured", None) is not raw:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT set_config('synchronous_commit', %s, false), "
                "set_config('plan_cache_mode', 'force_generic_plan', false), set_config('jit', 'off', false)",
                [synchronous_commit],
            )
        _session.configured = raw


# A lease due for renewal within this share of its interval is renewed with those due now.
RENEW_EARLY = 0.25
MAX_ERROR_CHARS = 4000
MAX_TRACEBACK_CHARS = 20000


def _error(exc: BaseException, **extra) -> dict:
    """Log extras for a database error."""
    return {"error": services.first_line(exc), **{key: str(value) for key, value in extra.items()}}


@dataclass(eq=False)
class Running:
    context: JobContext
    started: float  # perf_counter at dispatch
    renew_every: float  # seconds between lease renewals: min(heartbeat, TTL / 3)
    renew_at: float  # monotonic time the lease is next renewed
    finished: bool = False  # the handler returned; the result may not be recorded yet


class Recorder:
    """Writes finished runs in batches on its own thread and connection."""

    def __init__(self, worker: "Worker"):
        self.worker = worker
        self._pending: list[tuple[Running, services.Outcome]] = []
        self._lock = threading.Lock()  # guards _pending
        self._flushing = threading.Lock()  # one write at a time
        self._has_work = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="job-recorder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, results: list[tuple[Running, services.Outcome]]) -> None:
        with self._lock:
            self._pending.extend(results)
        self._has_work.set()

    def stop(self) -> None:
        self._stopped.set()
        self._has_work.set()
        self._thread.join(timeout=10)

    def flush(self) -> None:
        """Write everything pending now.

        A transient database error (a restart) puts the unwritten results back and raises; a
        batch the database refuses is split, and a result it refuses is recorded as that job's
        failure: one bad result never holds back the others.
        """
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            recorded: list[tuple[Running, str | None]] = []
            try:
                configure_session(self.worker.config.synchronous_commit)
                self._write(batch, recorded)
            except BaseException:
                written = {id(running) for running, _status in recorded}
                with self._lock:
                    self._pending[:0] = [item for item in batch if id(item[0]) not in written]
                raise
            finally:
                if recorded:
                    self.worker.on_recorded(recorded)

    def _complete(self, outcomes: list[services.Outcome]) -> dict[uuid.UUID, str]:
        return services.jobs_complete(outcomes=outcomes, worker_id=self.worker.worker_name)

    def _write(self, batch: list[tuple[Running, services.Outcome]], recorded: list) -> None:
        """One statement for the batch; if the database refuses it, one per result."""
        try:
            statuses = self._complete([outcome for _running, outcome in batch])
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            log.warning("the database refused a batch of results; writing them one by one", extra=_error(exc))
            for running, outcome in batch:
                recorded.append((running, self._write_alone(outcome)))
            return
        recorded.extend((running, statuses.get(running.context.job_id)) for running, _outcome in batch)

    def _write_alone(self, outcome: services.Outcome) -> str | None:
        """Write one result; if the database refuses it, record the job as failed with the reason."""
        job_id = outcome.lease.job_id
        try:
            return self._complete([outcome]).get(job_id)
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            refusal = services.first_line(exc)
        log.error("the database refused a job's result; the job fails", extra={"job_id": str(job_id), "error": refusal})
        failure = services.Outcome(
            lease=outcome.lease,
            kind="fatal",
            error=storable_text(f"The run's result could not be stored: {refusal}")[:MAX_ERROR_CHARS],
            duration_ms=outcome.duration_ms,
        )
        try:
            return self._complete([failure]).get(job_id)
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            log.error("could not record the failure either; the lease will expire", extra=_error(exc, job_id=job_id))
            return None

    def _loop(self) -> None:
        failures = 0
        while not self._stopped.is_set():
            self._has_work.wait()
            # Let a few more runs finish: one statement for many is much cheaper than many for one.
            self._stopped.wait(self.worker.config.record_linger_sec)
            self._has_work.clear()
            try:
                self.flush()
                failures = 0
            except Exception as exc:  # the results are kept; a dead recorder would strand them
                failures += 1
                if isinstance(exc, DATABASE_ERRORS):
                    log.warning("could not record results; retrying", extra=_error(exc))
                else:
                    log.exception("recording results failed; retrying")
                connection.close()
                self._stopped.wait(min(5.0, 0.25 * 2 ** min(failures, 5)))
                self._has_work.set()
        connection.close()


class Worker:
    def __init__(self, config: WorkerConfig, registry: Registry):
        self.config = config
        self.registry = registry
        self.worker_id = uuid.uuid4()
        self.worker_name = f"{socket.gethostname()}:{os.getpid()}:{str(self.worker_id)[:8]}"
        self.recorder = Recorder(self)
        self.periodic = PeriodicRunner(queue_tasks(config), runner_name=self.worker_name) if config.run_reaper else None
        self._periodic_stop = threading.Event()

        # Control thread only.
        self._running: dict[uuid.UUID, Running] = {}  # claimed and not yet recorded
        self._executing = dict.fromkeys(config.queues, 0)
        # Per-queue metric children, looked up once: labels() is not free at thousands of jobs a second.
        self._claimed_counter = {queue: metrics.CLAIMED.labels(queue=queue) for queue in config.queues}
        self._running_gauge = {queue: metrics.RUNNING.labels(queue=queue) for queue in config.queues}
        self._may_have_work = dict.fromkeys(config.queues, True)
        self._slot_freed_at: dict[str, float | None] = dict.fromkeys(config.queues)
        self._listener: psycopg.Connection | None = None
        self._registered = False
        self._stop_deadline: float | None = None
        self._next_heartbeat = time.monotonic() + config.heartbeat_sec
        self._next_sweep = time.monotonic() + config.sweep_sec
        self._next_available: float | None = None
        self._reschedule = False  # a job went back to its queue with a delay: re-read the timer
        self._retry_at = 0.0
        self._failures = 0

        # Handed over by other threads (deque appends and pops are atomic).
        self._work = {queue: SimpleQueue() for queue in config.queues}
        self._finished: deque[tuple[Running, services.Outcome | None]] = deque()
        self._recorded: deque[tuple[Running, str | None]] = deque()
        self._handed: deque[tuple[Running, str | None, Running | None]] = deque()  # runs handed on by handler threads
        self._stop_requested = threading.Event()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._asleep = False
        self._sleeping_until = 0.0  # monotonic time the loop's current wait ends
        self._notified = True  # the listener may have notifications to read (reading when there are none is harmless)

    # --- lifecycle ------------------------------------------------------------------

    def run(self) -> None:
        """Run until stopped, then drain: in-flight jobs get the shutdown timeout to finish."""
        self._start_threads()
        self.recorder.start()
        periodic = None
        if self.periodic is not None:
            periodic = threading.Thread(
                target=self.periodic.run_until, args=(self._periodic_stop,), name="job-periodic", daemon=True
            )
            periodic.start()
        log.info("worker starting", extra={"worker": self.worker_name, "queues": self.config.queues})
        try:
            while self.tick():
                pass
        finally:
            self._periodic_stop.set()
            if periodic is not None:
                periodic.join(timeout=10)
            self.recorder.stop()
            self._close_listener()
            self._stop_threads()
            connection.close()
            log.info("worker stopped", extra={"worker": self.worker_name})

    def request_stop(self) -> None:
        """Stop claiming; running jobs get ``shutdown_timeout_sec`` to finish (signal-safe)."""
        self._stop_requested.set()
        self._wake()

    def tick(self) -> bool:
        """One pass of the control loop; returns whether to keep going."""
        stopping = self._stop_requested.is_set()
        if stopping:
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + self.config.shutdown_timeout_sec
                log.info("stop requested; waiting for running jobs", extra={"running": len(self._running)})
            if not self._running:
                return self._finish()
            if time.monotonic() >= self._stop_deadline:
                return self._finish(release=True)

        self._wait(self._timeout(stopping))
        self._take_finished()
        if time.monotonic() < self._retry_at:
            return True
        try:
            self._ensure_connected()
            if self._notified:
                self._take_notifications()
            if self._reschedule:
                self._reschedule = False
                self._schedule_next_available()
            self._wake_for_scheduled_jobs()
            if not stopping:
                self._claim()
            self._heartbeat_if_due()
            self._sweep_if_due()
            self._failures = 0
        except DATABASE_ERRORS as exc:
            self._on_database_error(exc)
        return True

    def _finish(self, release: bool = False) -> bool:
        """Last database writes before exiting: record, release what still runs, deregister."""
        try:
            self._ensure_connected()
            self._take_finished()  # runs that ended since the last tick: their results go out with the flush
            self.recorder.flush()
            if release:
                executing = [running for running in self._running.values() if not running.finished]
                for running in executing:
                    running.context.mark_lease_lost()  # its thread may not write any more
                released = services.jobs_release(
                    leases=[running.context.job.lease for running in executing], worker_id=self.worker_name
                )
                log.warning("shutdown timeout: released running jobs", extra={"released": released})
            if self._registered:
                services.worker_deregister(worker_id=self.worker_id)
        except DATABASE_ERRORS as exc:
            log.error("could not finish cleanly; leases will expire and be reaped", extra=_error(exc))
        return False

    # --- waiting ----------------------------------------------------------------------

    def _timeout(self, stopping: bool) -> float:
        if self._finished or self._recorded or self._handed:
            return 0.0
        now = time.monotonic()
        claim_at = [self._claim_due_at(q) for q in self.config.queues if self._may_have_work[q]] if not stopping else []
        if any(due is not None and due <= now for due in claim_at):
            return 0.0
        deadlines = [self._next_heartbeat, self._next_sweep, *(due for due in claim_at if due is not None)]
        if self._running:
            deadlines.append(
                min(running.renew_at - RENEW_EARLY * running.renew_every for running in self._running.values())
            )
        if self._retry_at > now:
            deadlines.append(self._retry_at)
        if stopping:
            deadlines.append(self._stop_deadline)
        elif self._next_available is not None:
            deadlines.append(self._next_available)
        return max(0.0, min(deadlines) - now)

    def _wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout``; note whether notifications arrived (a zero timeout only looks)."""
        readable = [self._wake_read]
        listener = self._listener.fileno() if self._listener is not None and not self._listener.closed else None
        if listener is not None:
            readable.append(listener)
        self._sleeping_until = time.monotonic() + timeout
        self._asleep = timeout > 0
        if self._finished or self._recorded or self._handed or self._stop_requested.is_set():
            timeout = 0.0  # set before or while _asleep was: nothing wakes the loop for these
        ready = select.select(readable, [], [], timeout)[0]
        self._asleep = False
        if listener in ready:
            self._notified = True
        try:
            while os.read(self._wake_read, 4096):
                pass
        except BlockingIOError:
            pass

    def _wake(self) -> None:
        """Called from other threads: interrupt the control loop's wait (only if it waits)."""
        if self._asleep or self._stop_requested.is_set():
            try:
                os.write(self._wake_write, b"\0")
            except BlockingIOError:
                pass  # the pipe is full: the loop is being woken anyway

    # --- notifications and connections ------------------------------------------------------

    def _ensure_connected(self) -> None:
        configure_session(self.config.synchronous_commit)
        if self._listener is None or self._listener.closed:
            self._listener = psycopg.connect(**connection_params("default"), autocommit=True)
            self._listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
            self._listener.execute(f"LISTEN {CANCEL_CHANNEL}")
            self._notified = True
            # Whatever happened while we were not listening: look at every queue.
            self._may_have_work = dict.fromkeys(self.config.queues, True)
        if not self._registered:
            services.worker_register(
                worker_id=self.worker_id, hostname=socket.gethostname(), pid=os.getpid(), queues=self.config.queues
            )
            self._registered = True

    def _take_notifications(self) -> None:
        self._notified = False
        for notify in self._listener.notifies(timeout=0):
            if notify.channel == NOTIFY_CHANNEL:
                if notify.payload in self._may_have_work:
                    self._may_have_work[notify.payload] = True
            elif notify.channel == CANCEL_CHANNEL:
                running = self._running.get(_as_uuid(notify.payload))
                if running is not None:
                    running.context.mark_cancel_requested()

    def _wake_for_scheduled_jobs(self) -> None:
        """The timer for the next available_at (no NOTIFY fires when a delay runs out)."""
        if self._next_available is not None and time.monotonic() >= self._next_available:
            self._next_available = None
            self._may_have_work = dict.fromkeys(self.config.queues, True)

    def _close_listener(self) -> None:
        if self._listener is not None:
            try:
                self._listener.close()
            except psycopg.Error:
                pass
            self._listener = None

    def _on_database_error(self, exc: Exception) -> None:
        self._failures += 1
        delay = min(5.0, 0.25 * 2 ** min(self._failures, 5))
        log.warning("database unavailable; retrying", extra={**_error(exc), "retry_in_sec": delay})
        self._close_listener()
        connection.close()
        self._retry_at = time.monotonic() + delay

    # --- claiming -----------------------------------------------------------------------

    def _free(self, queue: str) -> int:
        return self.config.queues[queue] - self._executing[queue]

    def _claim_due_at(self, queue: str) -> float | None:
        """When to claim for a queue with free slots (None: no free slot).

        Like Nagle's algorithm: while other jobs of the queue still run, a claim waits up to
        ``claim_coalesce_sec`` for half the slots to be free, so short jobs are claimed in
        full batches rather than one statement per freed slot. An idle queue claims at once.
        """
        free = self._free(queue)
        if free <= 0:
            return None
        if self._executing[queue] == 0 or free * 2 >= self.config.queues[queue] or self._slot_freed_at[queue] is None:
            return 0.0
        return self._slot_freed_at[queue] + self.config.claim_coalesce_sec

    def _claim(self) -> None:
        drained = False
        now = time.monotonic()
        for queue in self.config.queues:
            due = self._claim_due_at(queue)
            if not self._may_have_work[queue] or due is None or due > now:
                continue
            free = min(self._free(queue), self.config.claim_batch)
            self._slot_freed_at[queue] = None
            try:
                jobs = services.jobs_claim(queue=queue, limit=free, worker_id=self.worker_name)
            except DATABASE_ERRORS as exc:
                if isinstance(exc, IntegrityError) and services.is_lock_key_race(exc):
                    # Another queue's worker took a job with the same lock_key at the same moment: claim again.
                    metrics.CLAIM_RACES.labels(queue=queue).inc()
                    continue
                if is_transient_error(exc) or not self._set_aside_unclaimable(queue, free):
                    raise
                continue
            for job in jobs:
                self._dispatch(job)
            self._claimed_counter[queue].inc(len(jobs))
            self._running_gauge[queue].set(self._executing[queue])
            # A short batch: nothing more is claimable in this queue now. Jobs waiting on a busy
            # lock_key become claimable when it frees: a NOTIFY (or our own recording) says so.
            if len(jobs) < free:
                self._may_have_work[queue] = False
                drained = True
        if drained:
            self._schedule_next_available()

    def _set_aside_unclaimable(self, queue: str, limit: int) -> bool:
        """After a claim the database refused: fail the jobs it refuses, so the rest can run."""
        refused = services.jobs_set_aside_unclaimable(queue=queue, limit=limit, worker_id=self.worker_name)
        if refused:
            log.error(
                "failed jobs the database refuses to claim",
                extra={"queue": queue, "job_ids": [str(job_id) for job_id in refused]},
            )
            metrics.SET_ASIDE.labels(queue=queue).inc(len(refused))
        return bool(refused)

    def _schedule_next_available(self) -> None:
        """Set the timer to the earliest future available_at in our queues (none fires a NOTIFY)."""
        soonest = selectors.next_available_at(queues=list(self.config.queues))
        if soonest is None:
            self._next_available = None
        else:
            self._next_available = time.monotonic() + max(0.0, (soonest - timezone.now()).total_seconds())

    def _running_for(self, job: services.ClaimedJob) -> Running:
        context = JobContext(job, self.worker_name, progress_interval_sec=self.config.progress_interval_sec)
        renew_every = min(self.config.heartbeat_sec, job.lease_ttl_sec / 3)
        return Running(
            context=context,
            started=time.perf_counter(),
            renew_every=renew_every,
            renew_at=time.monotonic() + renew_every,
        )

    def _dispatch(self, job: services.ClaimedJob) -> None:
        running = self._running_for(job)
        self._running[job.lease.job_id] = running
        self._executing[job.queue] += 1
        self._work[job.queue].put(running)

    # --- running ------------------------------------------------------------------------

    def _start_threads(self) -> None:
        for queue, concurrency in self.config.queues.items():
            for index in range(concurrency):
                threading.Thread(
                    target=self._handler_loop, args=(queue,), name=f"job-{queue}-{index}", daemon=True
                ).start()

    def _stop_threads(self) -> None:
        for queue, concurrency in self.config.queues.items():
            for _ in range(concurrency):
                self._work[queue].put(None)

    def _handler_loop(self, queue: str) -> None:
        work = self._work[queue]
        while True:
            running = work.get()
            if running is None:
                connection.close()
                return
            while running is not None:  # a run, then the runs of its lock_key handed on to this slot
                try:
                    outcome = self._execute(running)
                except BaseException as exc:  # a bug of ours, not the handler's: the slot must still be freed
                    log.exception("a run ended without an outcome; failing it")
                    outcome = self._failure(running.context.job, exc, kind="fatal", started=running.started)
                try:
                    close_broken_connections()  # a handler may leave a broken connection behind
                except BaseException:
                    log.exception("could not close a handler's connections")
                running = self._hand_off(running, outcome)

    def _hand_off(self, running: Running, outcome: services.Outcome | None) -> Running | None:
        """Report a finished run; return the next run for this slot, if any.

        Usually the run goes to the control loop and the recorder, which batch results. But
        when a job of its lock_key waits, this thread writes the result itself and, in the
        same statement, claims the queue's first claimable job (that one, unless another is
        due first), which then runs here at once: a key's jobs follow each other with one
        statement between them and no hop between threads.
        """
        job = running.context.job
        if outcome is None or not job.has_successor or self._stop_requested.is_set():
            self._finished.append((running, outcome))
            self._wake()
            return None
        try:
            status, claimed = services.job_complete_and_claim(
                outcome=outcome,
                queue=job.queue,
                worker_id=self.worker_name,
                synchronous_commit=self.config.synchronous_commit,
            )
        except DATABASE_ERRORS as exc:  # the recorder writes it instead, with its retries and fallbacks
            log.warning("could not hand the slot on; the recorder writes the result", extra=_error(exc))
            self._finished.append((running, outcome))
            self._wake()
            return None
        successor = self._running_for(claimed) if claimed else None
        self._handed.append((running, status, successor))
        # The books can wait for the loop's next tick, unless a slot came free to claim into or the
        # successor's lease is due for renewal before then.
        if successor is None or successor.renew_at - RENEW_EARLY * successor.renew_every < self._sleeping_until:
            self._wake()
        return successor

    def _execute(self, running: Running) -> services.Outcome | None:
        """Run one job in a handler thread; None when the lease was lost (nothing to write).

        Whatever the handler does, even raising SystemExit in this thread, the run ends with
        an outcome; a result PostgreSQL could not store is the run's error.
        """
        context = running.context
        job = context.job
        started = time.perf_counter()
        handler = None
        try:
            handler = self.registry.get(job.task)
            if handler is None:
                return services.Outcome(
                    lease=job.lease,
                    kind="fatal",
                    error=f"Unknown task {job.task!r}: no handler is registered for it in this worker.",
                    details={"known_tasks": self.registry.names()},
                )
            context.check_cancelled()
            result = handler.func(context)
            if problem := json_problem(result):
                raise TypeError(f"The handler's result cannot be stored: it {problem}.")
        except LeaseLost:
            return None
        except JobCancelled:
            return services.Outcome(
                lease=job.lease, kind="canceled", details={"by": "handler"}, progress=context.unwritten_progress()
            )
        except FatalError as exc:
            return self._failure(job, exc, kind="fatal", started=started, progress=context.unwritten_progress())
        except BaseException as exc:
            backoff = handler.retry_backoff_sec if handler and handler.retry_backoff_sec is not None else None
            delay = (self.config.retry_backoff_sec if backoff is None else backoff) * job.lease.attempt
            return self._failure(
                job, exc, kind="error", started=started, retry_delay_sec=delay, progress=context.unwritten_progress()
            )
        return services.Outcome(
            lease=job.lease,
            kind="succeeded",
            result=result,
            duration_ms=(time.perf_counter() - started) * 1000,
            progress=context.unwritten_progress(),
        )

    @staticmethod
    def _failure(job: services.ClaimedJob, exc: BaseException, *, kind: str, started: float, **fields):
        """The outcome of a run that raised, with texts PostgreSQL can store."""
        return services.Outcome(
            lease=job.lease,
            kind=kind,
            error=storable_text(f"{type(exc).__name__}: {_describe(exc)}")[:MAX_ERROR_CHARS],
            details={
                "exception_class": f"{type(exc).__module__}.{type(exc).__qualname__}",
                "traceback": storable_text(_traceback(exc))[-MAX_TRACEBACK_CHARS:],
            },
            duration_ms=(time.perf_counter() - started) * 1000,
            **fields,
        )

    def _take_finished(self) -> None:
        """Free the slots of finished runs, hand their results to the recorder, forget recorded
        ones, and book the runs that handler threads handed on to the next job of their key."""
        to_record, freed = [], set()
        while self._finished:
            running, outcome = self._finished.popleft()
            job = running.context.job
            running.finished = True
            self._free_slot(job.queue)
            freed.add(job.queue)
            if outcome is None:
                self._forget(running, None, written=False)
            else:
                to_record.append((running, outcome))
        if to_record:
            self.recorder.submit(to_record)
        while self._handed:
            running, status, successor = self._handed.popleft()
            running.finished = True
            queue = running.context.job.queue
            self._forget(running, status)
            if successor is None:
                self._free_slot(queue)
                freed.add(queue)
            else:  # it runs in the slot its predecessor held
                self._running[successor.context.job_id] = successor
                self._claimed_counter[queue].inc()
        while self._recorded:
            self._forget(*self._recorded.popleft())
        for queue in freed:
            self._running_gauge[queue].set(self._executing[queue])

    def _forget(self, running: Running, status: str | None, *, written: bool = True) -> None:
        """A run whose outcome is written, or (``written`` False) whose lease was lost in the run."""
        job = running.context.job
        self._running.pop(job.lease.job_id, None)
        # The next job of its lock_key, if any, is claimable now.
        self._may_have_work[job.queue] = True
        metrics.record_outcome(
            queue=job.queue, task=job.task, status=status, seconds=time.perf_counter() - running.started
        )
        if status == "queued":
            self._reschedule = True  # retried after a backoff: no NOTIFY will say when
        elif status is None and written:
            log.warning("lease lost before the result was recorded", extra={"job_id": str(job.lease.job_id)})

    def _free_slot(self, queue: str) -> None:
        self._executing[queue] -= 1
        if self._slot_freed_at[queue] is None:
            self._slot_freed_at[queue] = time.monotonic()

    def on_recorded(self, results: list[tuple[Running, str | None]]) -> None:
        """Called by the recorder (any thread) once results are written."""
        self._recorded.extend(results)
        self._wake()

    def _heartbeat_if_due(self) -> None:
        """Renew the leases that are due (each every min(heartbeat, TTL / 3), early ones batched
        with them), and the worker's own row every heartbeat period."""
        now = time.monotonic()
        due = [
            running for running in self._running.values() if running.renew_at <= now + RENEW_EARLY * running.renew_every
        ]
        if due:
            held = services.jobs_heartbeat(
                leases=[running.context.job.lease for running in due], worker_id=self.worker_name
            )
            for running in due:
                running.renew_at = now + running.renew_every
                if running.context.job_id not in held:
                    running.context.mark_lease_lost()
                elif held[running.context.job_id]:
                    running.context.mark_cancel_requested()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self.config.heartbeat_sec
            services.worker_heartbeat(worker_id=self.worker_id, running_jobs=len(self._running))

    def _sweep_if_due(self) -> None:
        """The safety net for a lost notification: look at every queue now and then."""
        now = time.monotonic()
        if now < self._next_sweep:
            return
        self._next_sweep = now + self.config.sweep_sec
        self._listener.execute("SELECT 1")  # a dead LISTEN connection raises here
        self._notified = True  # notifications that came with its answer wait to be read
        self._may_have_work = dict.fromkeys(self.config.queues, True)

    @property
    def running_jobs(self) -> int:
        return len(self._running)


def _describe(exc: BaseException) -> str:
    """str(exc), which a hostile exception may make raise."""
    try:
        return str(exc)
    except BaseException:
        return f"<{type(exc).__name__} whose message cannot be read>"


def _traceback(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(exc))
    except BaseException:
        return ""


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


MAX_CONCURRENCY = 1000


def parse_workers(entries) -> dict[str, int]:
    """WORKERS_JSON entries, or ``--queue`` flags made entries, as ``{queue: concurrency}``.

    One parser for both, so both have the same bounds: a valid queue name (as producers must
    use) and a concurrency from 1 to 1000 (summed when a queue is named twice).
    """
    if not isinstance(entries, list) or not entries:
        raise ValueError("must be a non-empty JSON list")
    queues: dict[str, int] = {}
    for entry in entries:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("queue"), str)
            or set(entry) - {"queue", "concurrency"}
        ):
            raise ValueError(f'each entry is {{"queue": NAME, "concurrency": N}}: {entry!r}')
        if problem := services.text_field_problem("queue", entry["queue"]):
            raise ValueError(f"queue name {entry['queue']!r}: {problem}")
        concurrency = entry.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {entry!r}")
        queues[entry["queue"]] = queues.get(entry["queue"], 0) + concurrency
        if queues[entry["queue"]] > MAX_CONCURRENCY:
            raise ValueError(
                f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {entry['queue']!r} sums higher"
            )
    return queues


def parse_workers_json(raw: str) -> dict[str, int]:
    """``[{"queue": "load.cbr", "concurrency": 2}, ...]`` → ``{"load.cbr": 2}``."""
    try:
        entries = json.loads(raw)
    except ValueError:
        raise ValueError("is not valid JSON") from None
    return parse_workers(entries)


def queue_flag_entry(flag: str) -> dict:
    """``NAME[:CONCURRENCY]`` as a WORKERS_JSON entry; the concurrency, after the last colon, in ASCII digits."""
    name, colon, concurrency = flag.rpartition(":")
    if not colon:
        return {"queue": flag}
    if not re.fullmatch(r"[0-9]{1,9}", concurrency):
        raise ValueError(f"expects NAME or NAME:CONCURRENCY, got {flag!r}")
    return {"queue": name, "concurrency": int(concurrency)}
