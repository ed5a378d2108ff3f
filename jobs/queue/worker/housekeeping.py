"""The job queue's periodic tasks: expired leases, silent workers, retention, the planner's
statistics of dl_jobs, its dead row versions, the kept counts and throughput (``jobs.runtime.registry``)."""

import logging
from functools import partial

from django.conf import settings

from jobs.queue import services
from jobs.queue.worker import metrics
from jobs.queue.worker.clocks import QueueClocks
from jobs.runtime.periodic import PeriodicWork
from jobs.runtime.registry import periodic_tasks

log = logging.getLogger("jobs.queue.worker.housekeeping")


@periodic_tasks
def queue_tasks(config) -> list[PeriodicWork]:
    """The job queue's periodic tasks, with the periods of a ``WorkerConfig``."""
    clocks = config.settings_of(QueueClocks)
    return [
        PeriodicWork("jobs.reap", clocks.reaper_period_sec, reap_expired_leases),
        PeriodicWork("jobs.dead_workers", DEAD_WORKER_CHECK_SEC, DeadWorkers(confirm_sec=settings.DL_DEAD_WORKER_SEC)),
        # A killed worker leaves its row; it shows as dead first (no heartbeat), then goes.
        PeriodicWork(
            "jobs.forget_workers",
            clocks.reaper_period_sec,
            partial(forget_workers, silent_for_sec=10 * clocks.heartbeat_sec),
        ),
        PeriodicWork(
            "jobs.retention",
            clocks.retention_period_sec,
            partial(
                prune_finished_jobs,
                older_than_sec=clocks.retention_age_sec,
                max_identical=clocks.retention_max_identical,
                # Twice the period: a run that came late still sees every signature since the last.
                finished_within_sec=2 * clocks.retention_period_sec + settings.DL_RETENTION_BUDGET_SEC,
            ),
        ),
        PeriodicWork("jobs.statistics", settings.DL_STATISTICS_CHECK_SEC, refresh_statistics),
        PeriodicWork("jobs.vacuum", settings.DL_VACUUM_CHECK_SEC, vacuum),
        PeriodicWork("jobs.counts", settings.DL_COUNTS_FOLD_SEC, services.job_counts_fold),
        PeriodicWork("jobs.throughput", settings.DL_COUNTS_FOLD_SEC, services.job_throughput_fold),
        PeriodicWork(
            "jobs.throughput_age",
            THROUGHPUT_AGE_SEC,
            partial(services.job_throughput_age, retention_days=settings.DL_THROUGHPUT_RETENTION_DAYS),
        ),
    ]


DEAD_WORKER_CHECK_SEC = 2.0
THROUGHPUT_AGE_SEC = 600.0  # its read covers the retention's hours: not at every fold
SERVER_UP_SEC = 30.0  # after a restart, live workers are still connecting


class DeadWorkers:
    """Finds workers whose process is gone and puts their jobs back at once. A worker is gone when
    its listening session has stayed closed ``confirm_sec`` (from the first time this process saw
    it closed) and it has not beaten since: a live worker's session is closed only while it
    reconnects, and it beats meanwhile. A frozen worker (its sessions open) is left to its leases."""

    def __init__(self, *, confirm_sec: float):
        self.confirm_sec = confirm_sec
        self.closed_since: dict = {}  # worker_id -> when this process first saw its session closed

    def __call__(self) -> dict:
        closed = services.workers_without_session(server_up_for_sec=SERVER_UP_SEC)
        self.closed_since = {worker_id: self.closed_since.get(worker_id, now) for worker_id, _beat, now in closed}
        gone = [
            worker_id
            for worker_id, beat, now in closed
            if (now - self.closed_since[worker_id]).total_seconds() >= self.confirm_sec
            and beat < self.closed_since[worker_id]
        ]
        if not gone:
            return {"gone": 0, "requeued": 0, "lost": 0}
        released = services.workers_gone(worker_ids=gone)
        for worker_id in gone:
            del self.closed_since[worker_id]
        log.warning(
            "workers gone; their jobs go back to their queues",
            extra={"workers": len(gone), "requeued": released.requeued, "lost": released.lost},
        )
        metrics.REAPED.labels(outcome="requeued").inc(released.requeued)
        metrics.REAPED.labels(outcome="lost").inc(released.lost)
        return {"gone": len(gone), "requeued": released.requeued, "lost": released.lost}


def reap_expired_leases() -> dict:
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
    return {"requeued": requeued, "lost": lost}


def forget_workers(*, silent_for_sec: float) -> dict:
    return {"forgotten": services.workers_prune(silent_for_sec=silent_for_sec)}


def prune_finished_jobs(*, older_than_sec: float, max_identical: int, finished_within_sec: float) -> dict:
    pruned = services.jobs_prune(
        older_than_sec=older_than_sec,
        max_identical=max_identical,
        finished_within_sec=finished_within_sec,
        budget_sec=settings.DL_RETENTION_BUDGET_SEC,
    )
    return {"pruned": pruned}


def refresh_statistics() -> dict:
    return {"analyzed": int(services.jobs_statistics_refresh())}


def vacuum() -> dict:
    return {"dead_rows_vacuumed": services.jobs_vacuum(min_dead_rows=settings.DL_VACUUM_DEAD_ROWS)}
