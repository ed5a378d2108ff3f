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

:class:`QueueSource` coordinates; each concern is a module of its own: claiming (:mod:`claiming`,
with :mod:`limits`, :mod:`floors` and :mod:`lost_claims`), the handler threads' hand-off
(:mod:`handoff`), booking what other threads hand over (:mod:`books`), lease renewals
(:mod:`renewals`), writing results (:mod:`results`).
"""

import logging
import os
import socket
import uuid
from collections import deque

from jobs.queue import services
from jobs.queue.handlers import Registry
from jobs.queue.models import CANCEL_CHANNEL, NOTIFY_CHANNEL, QUEUES_CHANNEL
from jobs.queue.worker import metrics
from jobs.queue.worker.books import Books
from jobs.queue.worker.claiming import Claimer
from jobs.queue.worker.clocks import QueueClocks
from jobs.queue.worker.floors import ClaimFloors
from jobs.queue.worker.handoff import HandOff
from jobs.queue.worker.limits import LimitedQueues
from jobs.queue.worker.lost_claims import LostClaims
from jobs.queue.worker.renewals import LeaseRenewals
from jobs.queue.worker.results import ResultWriter
from jobs.queue.worker.runs import JobRun
from jobs.runtime.config import WorkerConfig
from jobs.runtime.lanes import Lane
from jobs.runtime.loop import Runtime
from jobs.runtime.names import worker_name
from jobs.runtime.recorder import Recorder
from jobs.runtime.registry import WorkerSetup, work_source

log = logging.getLogger("jobs.queue.worker.source")


@work_source("queue")
class QueueSource:
    """The job queue on the runtime: claims, lanes per queue, results, leases.

    Three kinds of thread touch its state; who owns what:

    - the runtime's control thread calls every method of the runtime's interface (``start`` and
      ``stop`` too) and owns all the state: ``_running``, ``_registered``, the meters, the lanes'
      slot accounting (``jobs.runtime.lanes``), and everything of ``_claimer``, ``_books``,
      ``_renewals``, ``_limited`` and ``_floors``; it is the only thread that pops the deques;
    - the lanes' handler threads (``_handoff``: ``jobs.queue.worker.handoff``) read ``runtime``,
      ``_limited``'s limits and ``_floors``' floors (replaced on the control thread, never changed
      in place), write the run they hold and its successor, and append to ``_finished`` and
      ``_handed``;
    - the recorder's thread (``recorder``, ``jobs.queue.worker.results``) writes the runs it was
      given (``outcome``, ``written_in_doubt``) and appends to ``_recorded`` (``_on_recorded``).

    A run is the thread's that holds it: a handler thread's until it appends it to ``_finished``
    or ``_handed``, then the control thread's, which may give it to the recorder; the control thread
    reads the runs in ``_running`` meanwhile (to renew their leases; an ``outcome`` read as a
    handler thread sets it is either value, both safe) and writes only ``finished``, ``renew_at``
    and ``lease_loss_logged`` (its context's signals are events, for any thread). ``_lost_claims`` is shared by all claiming threads: its lock guards it
    (``jobs.queue.worker.lost_claims``). No claim thread exists: claims run on the control thread,
    and in a handler thread's hand-off. The periodic tasks' thread touches none of it.
    """

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
        self.runtime: Runtime | None = None  # set by start, before any other thread runs; then read by all

        # Control thread only (handler threads read ``_limited``'s limits and ``_floors``' floors).
        self._registered = False
        self._running: dict[uuid.UUID, JobRun] = {}  # claimed and not yet recorded
        meters = metrics.QueueMeters(self.queues)
        self._limited = LimitedQueues(self.queues)  # claimed within their limits (``jobs.queue.worker.limits``)
        self._floors = ClaimFloors(claim_floor_after_sec=self.clocks.claim_floor_after_sec)
        self._lost_claims = LostClaims(worker_name=self.worker_name)  # any claiming thread: under its lock

        # Handed over by other threads (deque appends and pops are atomic; only the control thread pops).
        self._finished: deque[JobRun] = deque()  # handler threads: runs to record, or whose lease was lost
        self._recorded: deque[tuple[JobRun, str | None]] = deque()  # the recorder: results written
        self._handed: deque[tuple[JobRun, str | None, JobRun | None]] = deque()  # handler threads: handed on
        self._assemble(registry, meters)

    def _assemble(self, registry: Registry, meters: metrics.QueueMeters) -> None:
        """The parts (each holds only references to the fields above, and what its docstring says)."""
        self._handoff = HandOff(
            registry=registry,
            clocks=self.clocks,
            worker_name=self.worker_name,
            synchronous_commit=self.synchronous_commit,
            limited=self._limited,
            floors=self._floors,
            lost_claims=self._lost_claims,
            finished=self._finished,
            handed=self._handed,
        )
        self.lanes = {
            queue: Lane(
                queue,
                concurrency,
                execute=self._handoff.execute,
                crashed=self._handoff.crashed,
                report=self._handoff.hand_off,
                thread_prefix=f"job-{queue}",
            )
            for queue, concurrency in self.queues.items()
        }
        writer = ResultWriter(worker_name=self.worker_name, synchronous_commit=self.synchronous_commit)
        self.recorder: Recorder[JobRun] = Recorder(
            name="job-recorder",
            write=writer.write,
            on_recorded=self._on_recorded,
            linger_sec=self.clocks.record_linger_sec,
        )
        self._claimer = Claimer(
            queues=self.queues,
            lanes=self.lanes,
            clocks=self.clocks,
            worker_name=self.worker_name,
            running=self._running,
            meters=meters,
            limited=self._limited,
            floors=self._floors,
            lost_claims=self._lost_claims,
        )
        self._books = Books(
            lanes=self.lanes,
            recorder=self.recorder,
            running=self._running,
            meters=meters,
            finished=self._finished,
            handed=self._handed,
            recorded=self._recorded,
            ended=self._claimer.ended,
        )
        self._renewals = LeaseRenewals(
            running=self._running, clocks=self.clocks, worker_id=self.worker_id, worker_name=self.worker_name
        )

    # --- the runtime's interface (control thread) ------------------------------------------

    def start(self, runtime: Runtime) -> None:
        self.runtime = self._handoff.runtime = runtime
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
        self._claimer.recheck()

    def notified(self, channel: str, payload: str) -> None:
        if channel == NOTIFY_CHANNEL:
            self._claimer.notified(payload)
        elif channel == QUEUES_CHANNEL:
            self._limited.refresh_soon()
        else:
            running = self._running.get(_as_uuid(payload))
            if running is not None:
                running.context.mark_cancel_requested()

    def collect(self) -> None:
        self._books.collect()

    def pending(self) -> bool:
        return self._books.pending()

    def deadline(self, now: float, stopping: bool) -> float | None:
        deadlines = self._renewals.deadlines()
        if not stopping:
            deadlines.extend(self._claimer.deadlines())
        return min(deadlines)

    def step(self, now: float, stopping: bool) -> None:
        self._register()
        self._give_back_lost_claims()
        self._claimer.reschedule_if_asked()
        if not stopping:
            self._claimer.claim(now)
        self._renewals.renew_if_due()

    def in_flight(self) -> int:
        return len(self._running)

    def finish(self, release: bool) -> None:
        """Record what ended, release what still runs (with ``release``), deregister."""
        self.recorder.flush()
        self._books.book_recorded()  # no pass of the loop follows: the runs just written end here
        if release:
            executing = [running for running in self._running.values() if not running.finished]
            for running in executing:
                running.context.mark_lease_lost()  # its thread may not write any more
            leases = [running.context.job.lease for running in executing]
            released = services.jobs_release(leases=leases, worker_id=self.worker_name, reason="worker_shutdown")
            log.warning("shutdown timeout: released running jobs", extra={"released": released})
        if self._registered:
            services.worker_deregister(worker_id=self.worker_id)

    # --- the rest ---------------------------------------------------------------------------

    def _register(self) -> None:
        if not self._registered:
            services.worker_register(
                worker_id=self.worker_id, hostname=socket.gethostname(), pid=os.getpid(), queues=self.queues
            )
            self._registered = True

    def _give_back_lost_claims(self) -> None:
        """After a claim whose answer may have been lost, give back the jobs it took (``jobs.queue.worker.lost_claims``)."""
        released = self._lost_claims.settle(booked=self._books.booked)
        if released:
            log.info("gave back jobs whose claim's answer was lost", extra={"released": released})
            self.recheck()

    def _on_recorded(self, results: list[tuple[JobRun, str | None]]) -> None:
        """Called by the recorder (its thread, or the control thread's ``finish``) once results are written."""
        self._recorded.extend(results)
        if self.runtime is not None:
            self.runtime.wake()


def _as_uuid(value: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(value)
    except ValueError:
        return None
