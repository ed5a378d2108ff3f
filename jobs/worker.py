"""The job queue as a work source of the runtime (``jobs.runtime``), and the runworker's configuration.

Each pass of the control loop, :class:`QueueSource`:

- hands finished runs to the recorder, and claims up to the free slots of every queue that
  may have work (one statement per queue; NOTIFY on ``dl_jobs`` says a queue has work,
  ``dl_jobs_cancel`` names a job to cancel);
- renews each lease every min(``DL_HEARTBEAT_SEC``, TTL / 3), leases due together in one statement;
- wakes for the next job's ``available_at`` (no NOTIFY fires when a delay runs out).

Each queue is a lane of handler threads. The recorder writes finished runs on its own
connection, as many per statement as have finished since its last write, so recording
overlaps claiming. Until a run is recorded its job is still ``running`` in the database: its
lease is renewed with the others, and claims leave jobs with its lock_key alone. When a
finished run's lock_key has a job waiting, its handler thread writes the result and claims
the next job in one statement, and runs it in the same slot.

The worker's own statements commit asynchronously (``DL_WORKER_SYNCHRONOUS_COMMIT``):
a database crash can lose the last few hundred milliseconds of claims and results,
which only means those jobs run again (at-least-once); jobs themselves are inserted by
producers with synchronous commits and are never lost.
"""

import json
import logging
import os
import re
import socket
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from jobs import metrics, selectors, services
from jobs.models import CANCEL_CHANNEL, NOTIFY_CHANNEL
from jobs.periodic import queue_tasks
from jobs.processes.periodic import process_tasks
from jobs.processes.source import NamespaceSource
from jobs.registry import FatalError, JobCancelled, JobContext, LeaseLost, Registry
from jobs.runtime.database import DATABASE_ERRORS, configure_session, error_extra
from jobs.runtime.lanes import Lane
from jobs.runtime.loop import Runtime
from jobs.runtime.periodic import PeriodicRunner, registered_tasks
from jobs.runtime.recorder import Recorder
from pipeline_project.core.storable import exception_details, exception_text, failure_text, json_problem
from pipeline_project.databases import is_transient_error

log = logging.getLogger("jobs.worker")


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
    namespaces: dict[str, int] = field(default_factory=dict)  # process namespace -> concurrency

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


def build_worker(config: WorkerConfig, registry: Registry) -> Runtime:
    """The runworker process: the runtime serving the configured queues and process
    namespaces side by side, with their housekeeping."""
    worker_id = uuid.uuid4()
    name = worker_name(worker_id)
    sources = [QueueSource(config, registry, worker_id=worker_id)] if config.queues else []
    if config.namespaces:
        sources.append(NamespaceSource(config.namespaces, worker_name=name))
    tasks = [*(queue_tasks(config) + registered_tasks() if config.queues else []), *process_tasks(config.namespaces)]
    periodic = PeriodicRunner(tasks, runner_name=name) if config.run_reaper and tasks else None
    return Runtime(
        sources,
        session=lambda: configure_session(config.synchronous_commit),
        sweep_sec=config.sweep_sec,
        shutdown_timeout_sec=config.shutdown_timeout_sec,
        periodic=periodic,
    )


def worker_name(worker_id: uuid.UUID) -> str:
    """How a worker process names itself in leases, events and logs: host, pid, id prefix."""
    return f"{socket.gethostname()}:{os.getpid()}:{str(worker_id)[:8]}"


# A lease due for renewal within this share of its interval is renewed with those due now.
RENEW_EARLY = 0.25


@dataclass(eq=False)
class Running:
    context: JobContext
    started: float  # perf_counter at dispatch
    renew_every: float  # seconds between lease renewals: min(heartbeat, TTL / 3)
    renew_at: float  # monotonic time the lease is next renewed
    finished: bool = False  # the handler returned; the result may not be recorded yet
    outcome: services.Outcome | None = None  # how it ended (None: its lease was lost in the run)


class QueueSource:
    """The job queue on the runtime: claims, lanes per queue, results, leases."""

    channels = (NOTIFY_CHANNEL, CANCEL_CHANNEL)

    def __init__(self, config: WorkerConfig, registry: Registry, *, worker_id: uuid.UUID | None = None):
        self.config = config
        self.registry = registry
        self.worker_id = worker_id or uuid.uuid4()
        self.worker_name = worker_name(self.worker_id)
        self.recorder: Recorder[Running] = Recorder(
            name="job-recorder", write=self._write, on_recorded=self._on_recorded, linger_sec=config.record_linger_sec
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
            for queue, concurrency in config.queues.items()
        }
        self.runtime: Runtime | None = None

        # Control thread only.
        self._running: dict[uuid.UUID, Running] = {}  # claimed and not yet recorded
        # Per-queue metric children, looked up once: labels() is not free at thousands of jobs a second.
        self._claimed_counter = {queue: metrics.CLAIMED.labels(queue=queue) for queue in config.queues}
        self._running_gauge = {queue: metrics.RUNNING.labels(queue=queue) for queue in config.queues}
        self._may_have_work = dict.fromkeys(config.queues, True)
        self._registered = False
        self._next_heartbeat = time.monotonic() + config.heartbeat_sec
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
        log.info("worker starting", extra={"worker": self.worker_name, "queues": self.config.queues})

    def stop(self) -> None:
        self.recorder.stop()
        for lane in self.lanes.values():
            lane.stop()
        log.info("worker stopped", extra={"worker": self.worker_name})

    def recheck(self) -> None:
        self._may_have_work = dict.fromkeys(self.config.queues, True)

    def notified(self, channel: str, payload: str) -> None:
        if channel == NOTIFY_CHANNEL:
            if payload in self._may_have_work:
                self._may_have_work[payload] = True
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
                for queue in self.config.queues
                if self._may_have_work[queue] and (due := self._claim_due_at(queue)) is not None
            )
            if self._next_available is not None:
                deadlines.append(self._next_available)
        if self._running:
            deadlines.append(
                min(running.renew_at - RENEW_EARLY * running.renew_every for running in self._running.values())
            )
        return min(deadlines)

    def step(self, now: float, stopping: bool) -> None:
        self._register()
        if self._reschedule:
            self._reschedule = False
            self._schedule_next_available()
        self._wake_for_scheduled_jobs()
        if not stopping:
            self._claim()
        self._heartbeat_if_due()

    def in_flight(self) -> int:
        return len(self._running)

    def finish(self, release: bool) -> None:
        """Record what ended, release what still runs (with ``release``), deregister."""
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

    # --- claiming -----------------------------------------------------------------------

    def _register(self) -> None:
        if not self._registered:
            services.worker_register(
                worker_id=self.worker_id, hostname=socket.gethostname(), pid=os.getpid(), queues=self.config.queues
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
        return lane.freed_at + self.config.claim_coalesce_sec

    def _claim(self) -> None:
        drained = False
        now = time.monotonic()
        for queue, lane in self.lanes.items():
            due = self._claim_due_at(queue)
            if not self._may_have_work[queue] or due is None or due > now:
                continue
            free = min(lane.free, self.config.claim_batch)
            lane.freed_at = None
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
                running = self._running_for(job)
                self._running[job.lease.job_id] = running
                lane.submit(running)
            self._claimed_counter[queue].inc(len(jobs))
            self._running_gauge[queue].set(lane.executing)
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

    # --- running (handler threads) ------------------------------------------------------

    def _execute(self, running: Running) -> services.Outcome | None:
        """Run one job; None when the lease was lost (nothing to write).

        Whatever the handler does, the run ends with an outcome; a result PostgreSQL could
        not store is the run's error.
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
            return _failure(job, exc, kind="fatal", started=started, progress=context.unwritten_progress())
        except BaseException as exc:
            backoff = handler.retry_backoff_sec if handler and handler.retry_backoff_sec is not None else None
            delay = (self.config.retry_backoff_sec if backoff is None else backoff) * job.lease.attempt
            return _failure(
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
    def _crashed(running: Running, exc: BaseException) -> services.Outcome:
        """A bug of ours, not the handler's, ended the run: it fails, and its slot is freed."""
        return _failure(running.context.job, exc, kind="fatal", started=running.started)

    def _hand_off(self, running: Running, outcome: services.Outcome | None) -> Running | None:
        """Report a finished run; return the next run for this slot, if any.

        Usually the run goes to the control loop and the recorder, which batch results. But
        when a job of its lock_key waits, this thread writes the result itself and, in the
        same statement, claims the queue's first claimable job (that one, unless another is
        due first), which then runs here at once: a key's jobs follow each other with one
        statement between them and no hop between threads.
        """
        running.outcome = outcome
        job = running.context.job
        if outcome is None or not job.has_successor or self.runtime.stop_requested.is_set():
            self._finished.append(running)
            self.runtime.wake()
            return None
        try:
            status, claimed = services.job_complete_and_claim(
                outcome=outcome,
                queue=job.queue,
                worker_id=self.worker_name,
                synchronous_commit=self.config.synchronous_commit,
            )
        except DATABASE_ERRORS as exc:  # the recorder writes it instead, with its retries and fallbacks
            log.warning("could not hand the slot on; the recorder writes the result", extra=error_extra(exc))
            self._finished.append(running)
            self.runtime.wake()
            return None
        successor = self._running_for(claimed) if claimed else None
        self._handed.append((running, status, successor))
        # The books can wait for the loop's next pass, unless a slot came free to claim into or the
        # successor's lease is due for renewal before then.
        if successor is None or successor.renew_at - RENEW_EARLY * successor.renew_every < self.runtime.sleeping_until:
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
                self._forget(running, None, written=False)
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
        while self._recorded:
            self._forget(*self._recorded.popleft())
        for queue in freed:
            self._running_gauge[queue].set(self.lanes[queue].executing)

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

    def _on_recorded(self, results: list[tuple[Running, str | None]]) -> None:
        """Called by the recorder (any thread) once results are written."""
        self._recorded.extend(results)
        if self.runtime is not None:
            self.runtime.wake()

    def _write(self, batch: list[Running], recorded: list) -> None:
        """The recorder's write: one statement for the batch; if the database refuses it, one per result."""
        configure_session(self.config.synchronous_commit)
        try:
            statuses = self._complete([running.outcome for running in batch])
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            log.warning("the database refused a batch of results; writing them one by one", extra=error_extra(exc))
            for running in batch:
                recorded.append((running, self._write_alone(running.outcome)))
            return
        recorded.extend((running, statuses.get(running.context.job_id)) for running in batch)

    def _complete(self, outcomes: list[services.Outcome]) -> dict[uuid.UUID, str]:
        return services.jobs_complete(outcomes=outcomes, worker_id=self.worker_name)

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
            error=failure_text(f"The run's result could not be stored: {refusal}"),
            duration_ms=outcome.duration_ms,
        )
        try:
            return self._complete([failure]).get(job_id)
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            log.error(
                "could not record the failure either; the lease will expire", extra=error_extra(exc, job_id=job_id)
            )
            return None

    # --- leases -------------------------------------------------------------------------

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


def _failure(job: services.ClaimedJob, exc: BaseException, *, kind: str, started: float, **fields) -> services.Outcome:
    """The outcome of a run that raised, its texts masked and storable as every failure's are."""
    return services.Outcome(
        lease=job.lease,
        kind=kind,
        error=exception_text(exc),
        details=exception_details(exc),
        duration_ms=(time.perf_counter() - started) * 1000,
        **fields,
    )


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None


MAX_CONCURRENCY = 1000
KINDS = ("queue", "namespace")


@dataclass(frozen=True)
class Workers:
    queues: dict[str, int]
    namespaces: dict[str, int]


def parse_workers(entries) -> Workers:
    """WORKERS_JSON entries, or ``--queue``/``--namespace`` flags made entries.

    One parser for both, so both have the same bounds: ``{"queue": NAME, "concurrency": N}``
    or ``{"namespace": NAME, "concurrency": N}``, a valid name (as producers must use) and a
    concurrency from 1 to 1000 (summed when a name is given twice).
    """
    if not isinstance(entries, list) or not entries:
        raise ValueError("must be a non-empty JSON list")
    found: dict[str, dict[str, int]] = {kind: {} for kind in KINDS}
    for entry in entries:
        kinds = [kind for kind in KINDS if isinstance(entry, dict) and kind in entry]
        if len(kinds) != 1 or not isinstance(entry[kinds[0]], str) or set(entry) - {kinds[0], "concurrency"}:
            raise ValueError(f'each entry is {{"queue" or "namespace": NAME, "concurrency": N}}: {entry!r}')
        kind, name = kinds[0], entry[kinds[0]]
        if problem := services.text_field_problem("queue", name):
            raise ValueError(f"{kind} name {name!r}: {problem}")
        concurrency = entry.get("concurrency", 1)
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {entry!r}")
        found[kind][name] = found[kind].get(name, 0) + concurrency
        if found[kind][name] > MAX_CONCURRENCY:
            raise ValueError(f"concurrency must be an integer from 1 to {MAX_CONCURRENCY}: {name!r} sums higher")
    return Workers(queues=found["queue"], namespaces=found["namespace"])


def parse_workers_json(raw: str) -> Workers:
    """``[{"queue": "load.cbr", "concurrency": 2}, {"namespace": "orders", "concurrency": 10}]``."""
    try:
        entries = json.loads(raw)
    except ValueError:
        raise ValueError("is not valid JSON") from None
    return parse_workers(entries)


def worker_flag_entry(kind: str, flag: str) -> dict:
    """``NAME[:CONCURRENCY]`` of a --queue or --namespace flag as a WORKERS_JSON entry; the
    concurrency, after the last colon, in ASCII digits."""
    name, colon, concurrency = flag.rpartition(":")
    if not colon:
        return {kind: flag}
    if not re.fullmatch(r"[0-9]{1,9}", concurrency):
        raise ValueError(f"expects NAME or NAME:CONCURRENCY, got {flag!r}")
    return {kind: name, "concurrency": int(concurrency)}
