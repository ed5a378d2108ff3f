"""State changes of jobs, in four parts: producers (``producers``), operators
(``operators``), the worker protocol (``claims``, ``leases``, ``outcomes``) and housekeeping
(``maintenance``).

Every change is one statement (or one short transaction) that also writes its journal
rows to ``dl_job_events``, so the journal and the job never disagree. Callers import the
names from here: ``from jobs.queue import services; services.job_enqueue(...)``.
"""

from jobs.queue.services.claims import (
    Claim,
    ClaimedJob,
    ClaimFloor,
    is_lock_key_race,
    jobs_claim,
    jobs_claim_from,
    jobs_claim_limited,
    jobs_set_aside_unclaimable,
)
from jobs.queue.services.dependencies import MAX_DEPENDS_ON
from jobs.queue.services.leases import Lease, job_progress, jobs_heartbeat, jobs_release
from jobs.queue.services.maintenance import (
    PERIODIC_LOCK_SPACE,
    REAP_BATCH,
    PeriodicRun,
    Reaped,
    job_counts_fold,
    jobs_prune,
    jobs_reap,
    jobs_statistics_refresh,
    jobs_vacuum,
    periodic_task_run,
    worker_deregister,
    worker_heartbeat,
    worker_register,
    workers_gone,
    workers_prune,
    workers_without_session,
)
from jobs.queue.services.operators import (
    Counts,
    Deletion,
    Selection,
    job_cancel,
    job_delete,
    job_retry,
    jobs_cancel,
    jobs_delete,
    jobs_retry,
    queues_delete,
)
from jobs.queue.services.outcomes import Outcome, job_complete_and_claim, jobs_complete
from jobs.queue.services.producers import (
    INTEGER_LIMITS,
    MIN_LEASE_TTL_SEC,
    NAME_PATTERN,
    TEXT_LIMITS,
    Enqueued,
    JobSpec,
    job_enqueue,
    job_enqueue_many,
    job_spec_problems,
    job_trigger_many,
    text_field_problem,
)
from jobs.queue.services.queues import QueueLimits, queue_limits_set, queue_pause, queue_resume, queues_wake
from pipeline_project.db.storable import first_line

__all__ = [
    "INTEGER_LIMITS",
    "MAX_DEPENDS_ON",
    "MIN_LEASE_TTL_SEC",
    "NAME_PATTERN",
    "PERIODIC_LOCK_SPACE",
    "REAP_BATCH",
    "TEXT_LIMITS",
    "Claim",
    "ClaimFloor",
    "ClaimedJob",
    "Counts",
    "Deletion",
    "Enqueued",
    "JobSpec",
    "Lease",
    "Outcome",
    "PeriodicRun",
    "QueueLimits",
    "Reaped",
    "Selection",
    "first_line",
    "is_lock_key_race",
    "job_cancel",
    "job_complete_and_claim",
    "job_counts_fold",
    "job_delete",
    "job_enqueue",
    "job_enqueue_many",
    "job_progress",
    "job_retry",
    "job_spec_problems",
    "job_trigger_many",
    "jobs_cancel",
    "jobs_claim",
    "jobs_claim_from",
    "jobs_claim_limited",
    "jobs_complete",
    "jobs_delete",
    "jobs_heartbeat",
    "jobs_prune",
    "jobs_reap",
    "jobs_release",
    "jobs_retry",
    "jobs_set_aside_unclaimable",
    "jobs_statistics_refresh",
    "jobs_vacuum",
    "periodic_task_run",
    "queue_limits_set",
    "queue_pause",
    "queue_resume",
    "queues_delete",
    "queues_wake",
    "text_field_problem",
    "worker_deregister",
    "worker_heartbeat",
    "worker_register",
    "workers_gone",
    "workers_prune",
    "workers_without_session",
]
