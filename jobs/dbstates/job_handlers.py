"""The engine's work on the job queue: prepare jobs run as ``sqlrs.prepare`` on ``SQLRS_QUEUE``;
the cache's eviction, the reconciliation of prepare jobs whose queue job ended without them and
the sweep of deleted jobs' directories run as periodic tasks."""

from django.conf import settings

from jobs.dbstates import cache, services, statefs
from jobs.dbstates.executor import job_dirs_sweep, prepare_job_run
from jobs.registry import task
from jobs.runtime.periodic import PeriodicTask, register_periodic


@task(services.PREPARE_TASK, retry_backoff_sec=1)
def prepare(ctx):
    return prepare_job_run(ctx)


register_periodic(
    lambda: [
        PeriodicTask(
            "sqlrs.cache_evict", settings.SQLRS_CACHE_EVICT_PERIOD_SEC, lambda: cache.cache_evict(trigger="periodic")
        ),
        PeriodicTask("sqlrs.jobs_reconcile", settings.SQLRS_RECONCILE_PERIOD_SEC, services.prepare_jobs_reconcile),
        PeriodicTask("sqlrs.job_dirs_sweep", settings.SQLRS_RECONCILE_PERIOD_SEC, job_dirs_sweep),
        # States a dead worker built but did not sync: durable before the machine can restart.
        PeriodicTask(
            "sqlrs.states_sync",
            settings.SQLRS_RECONCILE_PERIOD_SEC,
            lambda: {"marked_durable": statefs.markers_make_durable()},
        ),
    ]
)
