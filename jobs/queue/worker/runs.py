"""A job's run in a worker, from its claim until its outcome is recorded (``jobs.queue.worker.source``),
and the one log line of each run that does not succeed."""

import logging
import time
from dataclasses import dataclass

from jobs.queue import services
from jobs.queue.handlers import JobContext
from jobs.queue.states import OutcomeKind
from jobs.queue.worker.clocks import QueueClocks

# A lease due for renewal within this share of its interval is renewed with those due now.
RENEW_EARLY = 0.25

log = logging.getLogger(__name__)


@dataclass(eq=False)
class JobRun:
    context: JobContext
    started: float  # perf_counter at dispatch
    renew_every: float  # seconds between lease renewals: min(heartbeat, TTL / 3)
    renew_at: float  # monotonic time the lease is next renewed
    finished: bool = False  # the handler returned; the result may not be recorded yet
    outcome: services.Outcome | None = None  # how it ended (None: its lease was lost in the run)
    written_in_doubt: bool = False  # a write of its outcome broke off: it may have landed unanswered
    lease_loss_logged: bool = False  # a renewal may find its lease gone before the run ends

    @classmethod
    def claimed(cls, job: services.ClaimedJob, *, worker_name: str, clocks: QueueClocks) -> "JobRun":
        context = JobContext(job, worker_name, progress_interval_sec=clocks.progress_interval_sec)
        renew_every = min(clocks.heartbeat_sec, job.lease_ttl_sec / 3)
        return cls(context, time.perf_counter(), renew_every, renew_at=time.monotonic() + renew_every)

    @property
    def renew_from(self) -> float:
        """The monotonic time from which its lease is renewed with others due."""
        return self.renew_at - RENEW_EARLY * self.renew_every

    def log_end(self, status: str | None) -> None:
        """Log how the run ended unless it succeeded, once its outcome is written (``status``: the
        job's new status; None: nothing was written, its lease was gone). Every run ends here,
        whichever way its outcome was written (``jobs.queue.worker.books.Books._forget``)."""
        outcome = self.outcome
        if status is None and not self.written_in_doubt:  # in doubt: most likely our own write landed
            self.log_lease_lost()
        elif outcome.kind == OutcomeKind.CANCELED:
            log.info("job canceled while running", extra=self._log_fields("canceled", by=outcome.details.get("by")))
        elif outcome.kind != OutcomeKind.SUCCEEDED:
            job = self.context.job
            retried = (
                outcome.kind == OutcomeKind.ERROR and job.lease.attempt < job.max_attempts
            )  # as jobs_complete decides
            failure = {
                "error": outcome.error,
                "error_type": outcome.details.get("exception_class"),  # None: nothing raised (an unknown task)
                "traceback": outcome.details.get("traceback"),  # masked and bounded as the journal's
                "duration_ms": None if outcome.duration_ms is None else round(outcome.duration_ms, 3),
            }
            if retried:
                fields = self._log_fields("retry", **failure, retry_in_sec=outcome.retry_delay_sec)
                log.warning("job attempt failed; it will be retried", extra=fields)
            else:
                log.error("job failed", extra=self._log_fields("failed", **failure))

    def log_lease_lost(self) -> None:
        """Log, once, that this worker no longer holds the job: the reaper took it back (this worker
        was frozen or cut off past its lease) or an operator reset or deleted it."""
        if not self.lease_loss_logged:
            self.lease_loss_logged = True
            log.warning("job lease lost; the run's outcome is not recorded", extra=self._log_fields("lease_lost"))

    def _log_fields(self, outcome: str, **fields) -> dict:
        """The job's fields for the log; never its args, which may hold secrets."""
        job = self.context.job
        return {
            "job_id": str(job.lease.job_id),
            "queue": job.queue,
            "task": job.task,
            "attempt": job.lease.attempt,
            "max_attempts": job.max_attempts,
            "worker": self.context.worker_id,
            "outcome": outcome,
            **fields,
        }
