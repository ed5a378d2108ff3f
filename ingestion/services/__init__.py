"""State changes of ingestion (seed 004): items (``items``) and runs, their lifecycle on the job
queue and the jobs they enqueue (``runs``). Callers import the names from here: ``from ingestion import services``."""

from ingestion.services.items import COLUMNS, MAX_ITEMS_PER_CALL, ON_CONFLICT, items_upsert
from ingestion.services.runs import (
    MAX_ERROR_MESSAGE_CHARS,
    RunCanceled,
    run_cancel,
    run_create,
    run_job_claimed,
    run_jobs_enqueue,
    run_retry_failed,
    run_start,
    run_update,
    runs_settle,
    step_job_enqueue,
)
from ingestion.services.sources import source_delete, source_ensure

__all__ = [
    "COLUMNS",
    "MAX_ERROR_MESSAGE_CHARS",
    "MAX_ITEMS_PER_CALL",
    "ON_CONFLICT",
    "RunCanceled",
    "items_upsert",
    "run_cancel",
    "run_create",
    "run_job_claimed",
    "run_jobs_enqueue",
    "run_retry_failed",
    "run_start",
    "run_update",
    "runs_settle",
    "source_delete",
    "source_ensure",
    "step_job_enqueue",
]
