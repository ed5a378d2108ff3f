"""A job's run in a worker, from its claim until its outcome is recorded (``jobs.worker.source``)."""

import time
from dataclasses import dataclass

from jobs import services
from jobs.handlers import JobContext
from jobs.worker.clocks import QueueClocks

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
    written_in_doubt: bool = False  # a write of its outcome broke off: it may have landed unanswered

    @classmethod
    def claimed(cls, job: services.ClaimedJob, *, worker_name: str, clocks: QueueClocks) -> "Running":
        context = JobContext(job, worker_name, progress_interval_sec=clocks.progress_interval_sec)
        renew_every = min(clocks.heartbeat_sec, job.lease_ttl_sec / 3)
        return cls(context, time.perf_counter(), renew_every, renew_at=time.monotonic() + renew_every)

    @property
    def renew_from(self) -> float:
        """The monotonic time from which its lease is renewed with others due."""
        return self.renew_at - RENEW_EARLY * self.renew_every


def job_ids(runs: list[Running]) -> list[str]:
    return [str(running.context.job_id) for running in runs]
