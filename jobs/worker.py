"""The runworker process: a control loop, a recorder, and handler threads per queue.

The control loop (main thread) waits and then does the small steps that are due
(:meth:`Worker.tick`):

- wait on the LISTEN connection and a wake-up pipe (never a busy poll): NOTIFY on
  ``dl_jobs`` says a queue has work, ``dl_jobs_cancel`` names a job to cancel, handler
  threads and the recorder write to the pipe; the timeout is the nearest of the next
  heartbeat, the next reaper run, the next job's ``available_at`` and a slow safety sweep;
- hand finished runs to the recorder, and claim up to the free capacity of every queue
  that may have work (one statement per queue);
- renew every lease in one statement every ``DL_HEARTBEAT_SEC``;
- run the reaper and retention when due.

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
from django.db import DatabaseError, IntegrityError, close_old_connections, connection
from django.utils import timezone

from jobs import metrics, selectors, services
from jobs.models import CANCEL_CHANNEL, NOTIFY_CHANNEL
from jobs.registry import JobCancelled, JobContext, LeaseLost, Registry
from pipeline_project.databases import connection_params

log = logging.getLogger("jobs.worker")

DATABASE_ERRORS = (DatabaseError, psycopg.Error)


@dataclass(frozen=True)
class WorkerConfig:
    queues: dict[str, int]  # queue -> concurrency
    heartbeat_sec: float
    claim_backoff_sec: float
    retry_backoff_sec: float
    sweep_sec: float
    shutdown_timeout_sec: float
    claim_batch: int
    claim_coalesce_sec: float
    record_linger_sec: float
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
            "claim_backoff_sec": settings.DL_CLAIM_BACKOFF_SEC,
            "retry_backoff_sec": settings.DL_RETRY_BACKOFF_SEC,
            "sweep_sec": settings.DL_SWEEP_SEC,
            "shutdown_timeout_sec": settings.DL_SHUTDOWN_TIMEOUT_SEC,
            "claim_batch": settings.DL_CLAIM_BATCH,
            "claim_coalesce_sec": settings.DL_CLAIM_COALESCE_SEC,
            "record_linger_sec": settings.DL_RECORD_LINGER_SEC,
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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(eq=False)
class Running:
    context: JobContext
    started: float  # perf_counter at dispatch
    finished: bool = False  # the handler returned; the result may not be recorded yet


class Reaper:
    """Expired leases back to the queue, dead workers forgotten, old jobs pruned, when due."""

    def __init__(self, config: WorkerConfig):
        self.config = config
        self.next_reap = 0.0
        self.next_prune = time.monotonic() + config.retention_period_sec

    def run_due(self) -> float:
        """Do what is due; return the monotonic time something is next due."""
        now = time.monotonic()
        if now >= self.next_reap:
            self.reap()
            self.next_reap = now + self.config.reaper_period_sec
        if now >= self.next_prune:
            self.prune()
            self.next_prune = now + self.config.retention_period_sec
        return min(self.next_reap, self.next_prune)

    def reap(self) -> tuple[int, int]:
        """Reap in batches until none is left; return (requeued, lost)."""
        requeued = lost = 0
        while True:
            reaped = services.jobs_reap()
            requeued, lost = requeued + reaped.requeued, lost + reaped.lost
            if reaped.requeued + reaped.lost < services.REAP_BATCH:
                break
        if requeued or lost:
            log.warning("reaped expired leases", extra={"requeued": requeued, "lost": lost})
            metrics.REAPED.labels(outcome="requeued").inc(requeued)
            metrics.REAPED.labels(outcome="lost").inc(lost)
        services.workers_prune(silent_for_sec=10 * self.config.heartbeat_sec)
        return requeued, lost

    def prune(self) -> int:
        pruned = services.jobs_prune(
            older_than_sec=self.config.retention_age_sec, max_identical=self.config.retention_max_identical
        )
        if pruned:
            log.info("pruned finished jobs", extra={"pruned": pruned})
        return pruned


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
        """Write everything pending now (raises on a database error, keeping the results)."""
        with self._flushing:
            with self._lock:
                batch, self._pending = self._pending, []
            if not batch:
                return
            try:
                configure_session(self.worker.config.synchronous_commit)
                statuses = services.jobs_complete(
                    outcomes=[outcome for _running, outcome in batch], worker_id=self.worker.worker_name
                )
            except BaseException:
                with self._lock:
                    self._pending[:0] = batch
                raise
            self.worker.on_recorded([(running, statuses.get(running.context.job_id)) for running, _outcome in batch])

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
                    log.warning("could not record results; retrying", extra={"error": _first_line(exc)})
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
        self.reaper = Reaper(config) if config.run_reaper else None
        self.recorder = Recorder(self)

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
        self._stop_requested = threading.Event()
        self._wake_read, self._wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(self._wake_write, False)
        self._asleep = False
        self._notified = True  # the listener may have notifications to read (reading when there are none is harmless)

    # --- lifecycle ------------------------------------------------------------------

    def run(self) -> None:
        """Run until stopped, then drain: in-flight jobs get the shutdown timeout to finish."""
        self._start_threads()
        self.recorder.start()
        log.info("worker starting", extra={"worker": self.worker_name, "queues": self.config.queues})
        try:
            while self.tick():
                pass
        finally:
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
            if self.reaper is not None and not stopping:
                self.reaper.run_due()
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
            log.error("could not finish cleanly; leases will expire and be reaped", extra={"error": _first_line(exc)})
        return False

    # --- waiting ----------------------------------------------------------------------

    def _timeout(self, stopping: bool) -> float:
        if self._finished or self._recorded:
            return 0.0
        now = time.monotonic()
        claim_at = [self._claim_due_at(q) for q in self.config.queues if self._may_have_work[q]] if not stopping else []
        if any(due is not None and due <= now for due in claim_at):
            return 0.0
        deadlines = [self._next_heartbeat, self._next_sweep, *(due for due in claim_at if due is not None)]
        if self._retry_at > now:
            deadlines.append(self._retry_at)
        if stopping:
            deadlines.append(self._stop_deadline)
        else:
            if self.reaper is not None:
                deadlines.append(min(self.reaper.next_reap, self.reaper.next_prune))
            if self._next_available is not None:
                deadlines.append(self._next_available)
        return max(0.0, min(deadlines) - now)

    def _wait(self, timeout: float) -> None:
        """Sleep until woken or ``timeout``; note whether notifications arrived (a zero timeout only looks)."""
        readable = [self._wake_read]
        listener = self._listener.fileno() if self._listener is not None and not self._listener.closed else None
        if listener is not None:
            readable.append(listener)
        self._asleep = timeout > 0
        if self._finished or self._recorded or self._stop_requested.is_set():
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
        log.warning("database unavailable; retrying", extra={"error": _first_line(exc), "retry_in_sec": delay})
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
        finishing = [running.context.job.lock_key for running in self._running.values() if running.finished]
        now = time.monotonic()
        for queue in self.config.queues:
            due = self._claim_due_at(queue)
            if not self._may_have_work[queue] or due is None or due > now:
                continue
            free = min(self._free(queue), self.config.claim_batch)
            self._slot_freed_at[queue] = None
            try:
                jobs, bounced = services.jobs_claim(
                    queue=queue,
                    limit=free,
                    worker_id=self.worker_name,
                    busy_backoff_sec=self.config.claim_backoff_sec,
                    skip_lock_keys=finishing,
                )
            except IntegrityError:
                # Another worker took a job with the same lock_key at the same moment; claim again.
                metrics.CLAIM_RACES.labels(queue=queue).inc()
                continue
            for job in jobs:
                self._dispatch(job)
            self._claimed_counter[queue].inc(len(jobs))
            self._running_gauge[queue].set(self._executing[queue])
            if bounced:
                metrics.BOUNCED.labels(queue=queue).inc(bounced)
            # A short batch without bounces means nothing more is available in this queue now.
            if len(jobs) + bounced < free:
                self._may_have_work[queue] = False
                drained = True
        if drained:
            self._schedule_next_available()

    def _schedule_next_available(self) -> None:
        """Set the timer to the earliest future available_at in our queues (none fires a NOTIFY)."""
        soonest = selectors.next_available_at(queues=list(self.config.queues))
        if soonest is None:
            self._next_available = None
        else:
            self._next_available = time.monotonic() + max(0.0, (soonest - timezone.now()).total_seconds())

    def _dispatch(self, job: services.ClaimedJob) -> None:
        context = JobContext(job, self.worker_name)
        running = Running(context=context, started=time.perf_counter())
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
            outcome = self._execute(running)
            close_old_connections()  # a handler may leave a broken connection behind
            self._finished.append((running, outcome))
            self._wake()

    def _execute(self, running: Running) -> services.Outcome | None:
        """Run one job in a handler thread; None when the lease was lost (nothing to write)."""
        context = running.context
        job = context.job
        handler = self.registry.get(job.task)
        if handler is None:
            return services.Outcome(
                lease=job.lease,
                kind="fatal",
                error=f"Unknown task {job.task!r}: no handler is registered for it in this worker.",
                details={"known_tasks": self.registry.names()},
            )
        started = time.perf_counter()
        try:
            context.check_cancelled()
            result = handler.func(context)
            json.dumps(result)  # refuse a result that cannot be stored, before calling it a success
        except LeaseLost:
            return None
        except JobCancelled:
            return services.Outcome(lease=job.lease, kind="canceled", details={"by": "handler"})
        except Exception as exc:
            delay = (
                handler.retry_backoff_sec if handler.retry_backoff_sec is not None else self.config.retry_backoff_sec
            )
            return services.Outcome(
                lease=job.lease,
                kind="error",
                error=f"{type(exc).__name__}: {exc}"[:4000],
                details={
                    "exception_class": f"{type(exc).__module__}.{type(exc).__qualname__}",
                    "traceback": traceback.format_exc()[-20000:],
                },
                retry_delay_sec=delay * job.lease.attempt,
                duration_ms=(time.perf_counter() - started) * 1000,
            )
        return services.Outcome(
            lease=job.lease, kind="succeeded", result=result, duration_ms=(time.perf_counter() - started) * 1000
        )

    def _take_finished(self) -> None:
        """Free the slots of finished runs, hand their results to the recorder, forget recorded ones."""
        to_record, freed = [], set()
        while self._finished:
            running, outcome = self._finished.popleft()
            job = running.context.job
            running.finished = True
            self._executing[job.queue] -= 1
            freed.add(job.queue)
            if self._slot_freed_at[job.queue] is None:
                self._slot_freed_at[job.queue] = time.monotonic()
            if outcome is None:
                self._running.pop(job.lease.job_id, None)
                metrics.record_outcome(
                    queue=job.queue, task=job.task, status=None, seconds=time.perf_counter() - running.started
                )
            else:
                to_record.append((running, outcome))
        if to_record:
            self.recorder.submit(to_record)
        for queue in freed:
            self._running_gauge[queue].set(self._executing[queue])
        while self._recorded:
            running, status = self._recorded.popleft()
            job = running.context.job
            self._running.pop(job.lease.job_id, None)
            # Claims skipped jobs sharing its lock_key while the result was unrecorded: look again.
            self._may_have_work[job.queue] = True
            metrics.record_outcome(
                queue=job.queue, task=job.task, status=status, seconds=time.perf_counter() - running.started
            )
            if status == "queued":
                self._reschedule = True  # retried after a backoff: no NOTIFY will say when
            elif status is None:
                log.warning("lease lost before the result was recorded", extra={"job_id": str(job.lease.job_id)})

    def on_recorded(self, results: list[tuple[Running, str | None]]) -> None:
        """Called by the recorder (any thread) once results are written."""
        self._recorded.extend(results)
        self._wake()

    def _heartbeat_if_due(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.config.heartbeat_sec
        held = services.jobs_heartbeat(
            leases=[running.context.job.lease for running in self._running.values()], worker_id=self.worker_name
        )
        for job_id, running in self._running.items():
            if job_id not in held:
                running.context.mark_lease_lost()
            elif held[job_id]:
                running.context.mark_cancel_requested()
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


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


def parse_workers_json(raw: str) -> dict[str, int]:
    """``[{"queue": "load.cbr", "concurrency": 2}, ...]`` → ``{"load.cbr": 2}``."""
    entries = json.loads(raw)
    if not isinstance(entries, list) or not entries:
        raise ValueError("WORKERS_JSON must be a non-empty JSON list")
    queues: dict[str, int] = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("queue"), str) or not entry["queue"]:
            raise ValueError(f"each WORKERS_JSON entry needs a queue name: {entry!r}")
        concurrency = entry.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 1000:
            raise ValueError(f"concurrency must be an integer from 1 to 1000: {entry!r}")
        queues[entry["queue"]] = queues.get(entry["queue"], 0) + concurrency
    return queues
