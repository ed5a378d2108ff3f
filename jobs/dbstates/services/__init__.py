"""State changes of the engine, in four parts: prepare jobs (``jobs``), states (``states``),
instances (``instances``) and deletions (``deletions``); and its discovery file (``engine``). Each owns its transaction and locking;
callers import the names from here: ``from jobs.dbstates import services; services.job_finish(...)``.
"""

from jobs.dbstates.engine.identity import engine_json_write
from jobs.dbstates.engine.steps import PrepareRequest
from jobs.dbstates.services.deletions import instance_delete, prepare_job_delete, prepare_job_purge, state_delete
from jobs.dbstates.services.instances import instance_create, instance_server_ensure
from jobs.dbstates.services.prepare_jobs import (
    MAX_IMAGE_ID,
    PREPARE_TASK,
    NewEvent,
    error_of,
    job_events_add,
    job_finish,
    job_log,
    job_plan_store,
    job_start,
    jobs_retention_apply,
    prepare_job_cancel,
    prepare_job_submit,
    prepare_jobs_reconcile,
    prepare_request_check,
    task_status_set,
)
from jobs.dbstates.services.states import cache_eviction_record, state_invalidate, state_record, state_use

__all__ = [
    "MAX_IMAGE_ID",
    "PREPARE_TASK",
    "NewEvent",
    "PrepareRequest",
    "cache_eviction_record",
    "engine_json_write",
    "error_of",
    "instance_create",
    "instance_delete",
    "instance_server_ensure",
    "job_events_add",
    "job_finish",
    "job_log",
    "job_plan_store",
    "job_start",
    "jobs_retention_apply",
    "prepare_job_cancel",
    "prepare_job_delete",
    "prepare_job_purge",
    "prepare_job_submit",
    "prepare_jobs_reconcile",
    "prepare_request_check",
    "state_delete",
    "state_invalidate",
    "state_record",
    "state_use",
    "task_status_set",
]
