"""The job queue's periodic tasks: expired leases, silent workers, retention, the planner's
statistics of dl_jobs, its dead row versions (``jobs.runtime.registry``)."""

import logging
from functools import partial

from django.conf import settings

from jobs import metrics, services
from jobs.runtime.periodic import PeriodicTask
from jobs.runtime.registry import periodic_tasks

log = logging.getLogger("jobs.periodic")


@periodic_tasks
def queue_tasks(config) -> list[PeriodicTask]:
    """The job queue's periodic tasks, with the periods of a ``WorkerConfig``."""
    return [
        PeriodicTask("jobs.reap", config.reaper_period_sec, reap_expired_leases),
        # A killed worker leaves its row; it shows as dead first (no heartbeat), then goes.
        PeriodicTask(
            "jobs.forget_workers",
            config.reaper_period_sec,
            partial(forget_workers, silent_for_sec=10 * config.heartbeat_sec),
        ),
        PeriodicTask(
            "jobs.retention",
            config.retention_period_sec,
            partial(
                prune_finished_jobs,
                older_than_sec=config.retention_age_sec,
                max_identical=config.retention_max_identical,
                # Twice the period: a run that came late still sees every signature since the last.
                finished_within_sec=2 * config.retention_period_sec + settings.DL_RETENTION_BUDGET_SEC,
            ),
        ),
        PeriodicTask("jobs.statistics", settings.DL_STATISTICS_CHECK_SEC, refresh_statistics),
        PeriodicTask("jobs.vacuum", settings.DL_VACUUM_CHECK_SEC, vacuum),
        PeriodicTask("jobs.counts", settings.DL_COUNTS_FOLD_SEC, services.job_counts_fold),
    ]


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
