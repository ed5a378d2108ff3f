"""The engine's work on the job queue: prepare jobs run as ``sqlrs.prepare`` on ``SQLRS_QUEUE``,
and the cache's eviction runs as a periodic task."""

from django.conf import settings

from jobs.dbstates import cache
from jobs.dbstates.executor import prepare_job_run
from jobs.dbstates.services import PREPARE_TASK
from jobs.registry import task
from jobs.runtime.periodic import PeriodicTask, register_periodic


@task(PREPARE_TASK, retry_backoff_sec=1)
def prepare(ctx):
    return prepare_job_run(ctx)


register_periodic(
    lambda: [
        PeriodicTask(
            "sqlrs.cache_evict", settings.SQLRS_CACHE_EVICT_PERIOD_SEC, lambda: cache.cache_evict(trigger="periodic")
        )
    ]
)
