"""The control thread's books of a worker's runs: what other threads hand over, and each run's end.

Runs reach the control thread through three deques (appends and pops are atomic), each appended
to by other threads and popped only here: ``finished`` (handler threads: runs for the recorder, or
whose lease was lost), ``handed`` (handler threads: runs whose result they wrote, each with the
successor that runs in its slot, if any) and ``recorded`` (the recorder: results written). A run
is in ``running`` from its claim until its end is booked here (``_forget``), whoever wrote it.
"""

import time
import uuid
from collections import deque
from collections.abc import Callable

from jobs.queue.worker import metrics
from jobs.queue.worker.runs import JobRun
from jobs.runtime.recorder import Recorder


class Books:
    """Booking what the other threads hand over (control thread). It owns no field of its own but
    the references below: ``running`` and ``meters`` are the source's (control thread), the deques
    are the hand-overs described above, and ``ended`` is the claimer's (control thread)."""

    def __init__(
        self,
        *,
        lanes: dict,
        recorder: Recorder[JobRun],
        running: dict[uuid.UUID, JobRun],
        meters: metrics.QueueMeters,
        finished: deque,
        handed: deque,
        recorded: deque,
        ended: Callable[[str, str | None], None],
    ):
        self._lanes, self._recorder = lanes, recorder
        self._running, self._meters = running, meters
        self._finished, self._handed, self._recorded = finished, handed, recorded
        self._ended = ended  # ended(queue, status): a job of the queue ended (``Claimer.ended``)

    def pending(self) -> bool:
        return bool(self._finished or self._recorded or self._handed)

    def collect(self) -> None:
        """Free the slots of finished runs, hand their results to the recorder, forget recorded
        ones, and book the runs that handler threads handed on to the next job of their key."""
        to_record, freed = [], set()
        while self._finished:
            running = self._finished.popleft()
            queue = running.context.job.queue
            running.finished = True
            self._lanes[queue].release()
            freed.add(queue)
            if running.outcome is None:
                self._forget(running, None)
            else:
                to_record.append(running)
        if to_record:
            self._recorder.submit(to_record)
        while self._handed:
            running, status, successor = self._handed.popleft()
            running.finished = True
            queue = running.context.job.queue
            self._forget(running, status)
            if successor is None:
                self._lanes[queue].release()
                freed.add(queue)
            else:  # it runs in the slot its predecessor held
                self._running[successor.context.job_id] = successor
                self._meters.claimed[queue].inc()
        self.book_recorded()
        for queue in freed:
            self._meters.running[queue].set(self._lanes[queue].executing)

    def book_recorded(self) -> None:
        while self._recorded:
            self._forget(*self._recorded.popleft())

    def _forget(self, running: JobRun, status: str | None) -> None:
        """A run that ended: its outcome written (``status``: the job's new status; None: its lease
        was gone, reaped or reset) or its lease lost in the run (no outcome). Logged here, once."""
        job = running.context.job
        self._running.pop(job.lease.job_id, None)
        self._ended(job.queue, status)
        metrics.record_outcome(
            queue=job.queue, task=job.task, status=status, seconds=time.perf_counter() - running.started
        )
        running.log_end(status)

    def booked(self) -> set[uuid.UUID]:
        """The jobs this worker holds: running, or handed on to a slot and not yet in ``running``
        (``LostClaims.settle`` calls it while no claim is in flight: no handler thread appends to
        ``handed`` meanwhile)."""
        return set(self._running) | {successor.context.job_id for _, _, successor in self._handed if successor}
