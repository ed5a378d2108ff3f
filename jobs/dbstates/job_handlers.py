"""The engine's work on the job queue: prepare jobs run as ``sqlrs.prepare`` on ``SQLRS_QUEUE``."""

from jobs.dbstates.executor import prepare_job_run
from jobs.dbstates.services import PREPARE_TASK
from jobs.registry import task


@task(PREPARE_TASK, retry_backoff_sec=1)
def prepare(ctx):
    return prepare_job_run(ctx)
