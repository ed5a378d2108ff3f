"""The engine's work on the job queue: prepare jobs run as ``sqlrs.prepare`` on ``SQLRS_QUEUE``
(its periodic tasks: ``jobs.dbstates.worker``)."""

from jobs.dbstates import services
from jobs.dbstates.engine.executor import prepare_job_run
from jobs.queue.handlers import task


@task(services.PREPARE_TASK, retry_backoff_sec=1)
def prepare(ctx):
    return prepare_job_run(ctx)
