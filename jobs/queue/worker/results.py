"""How the queue's recorder writes finished runs: many per statement, and when the database
refuses a batch, one at a time, a result it refuses becoming that job's failure."""

import logging
import uuid

from jobs.queue import services
from jobs.queue.states import OutcomeKind
from jobs.queue.worker.runs import JobRun
from jobs.runtime.database import DATABASE_ERRORS, configure_session, error_extra
from pipeline_project.db.connections import is_transient_error
from pipeline_project.db.storable import failure_text

log = logging.getLogger("jobs.queue.worker.source")


class ResultWriter:
    """The recorder's ``write`` for the runs (``jobs.queue.worker.runs.JobRun``) of one worker."""

    def __init__(self, *, worker_name: str, synchronous_commit: str):
        self.worker_name = worker_name
        self.synchronous_commit = synchronous_commit

    def write(self, batch: list, recorded: list) -> None:
        """One statement for the batch; if the database refuses it, one per result."""
        configure_session(self.synchronous_commit)
        try:
            statuses = self._complete([running.outcome for running in batch])
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                for running in batch:  # the statement may have committed: a retry matches no lease then
                    running.written_in_doubt = True
                raise
            log.warning("the database refused a batch of results; writing them one by one", extra=error_extra(exc))
            for running in batch:
                recorded.append((running, self._write_alone(running)))
            return
        recorded.extend((running, statuses.get(running.context.job_id)) for running in batch)

    def _complete(self, outcomes: list[services.Outcome]) -> dict[uuid.UUID, str]:
        return services.jobs_complete(outcomes=outcomes, worker_id=self.worker_name)

    def _write_alone(self, running: JobRun) -> str | None:
        """Write one result; if the database refuses it, record the job as failed with the reason:
        the run's outcome from then on (it is logged as the run's failure)."""
        outcome = running.outcome
        job_id = outcome.lease.job_id
        try:
            return self._complete([outcome]).get(job_id)
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            refusal = services.first_line(exc)
        running.outcome = services.Outcome(
            lease=outcome.lease,
            kind=OutcomeKind.FATAL,
            error=failure_text(f"The run's result could not be stored: {refusal}"),
            duration_ms=outcome.duration_ms,
        )
        try:
            return self._complete([running.outcome]).get(job_id)
        except DATABASE_ERRORS as exc:
            if is_transient_error(exc):
                raise
            log.error(
                "could not record the failure either; the lease will expire", extra=error_extra(exc, job_id=job_id)
            )
            return None
