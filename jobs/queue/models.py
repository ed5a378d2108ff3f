"""The seed 002 queue tables, column for column: ``dl_jobs`` and ``dl_job_events``.

``tests/jobs/queue/test_schema.py`` applies the seed DDL to a scratch database and checks that
``migrate`` builds the same columns, types, defaults, enum, CHECK constraint and indexes.
Indexes beyond the seed's three are marked "extra" and listed in the manual (systems/running-jobs.md).
"""

from functools import partial

import pgtrigger
from django.contrib.postgres.indexes import BrinIndex, GinIndex
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import MD5, Cast

from jobs.queue.states import FINISHED, LISTED_APART, WAITING_AVAILABLE_AT, EventKind, JobStatus, shown_status
from jobs.queue.triggers import notify_events_sql, notify_ready_sql
from pipeline_project.db.counts import RowCounts
from pipeline_project.db.fields import BigSerialField, NotDistinctFrom, PgEnumField, TransactionNow
from pipeline_project.db.ids import uuid7
from pipeline_project.db.triggers import statement_notify_triggers, statement_trigger

DL_STATUS_TYPE = "dl_status"
NOTIFY_CHANNEL = "dl_jobs"
CANCEL_CHANNEL = "dl_jobs_cancel"
QUEUES_CHANNEL = "dl_queues"  # payload: a queue whose limits changed
EVENTS_CHANNEL = "dl_job_events"  # payload: ids of jobs with new events, comma-separated
EVENTS_NOTIFY = notify_events_sql(channel=EVENTS_CHANNEL)


# Jobs per queue, task and status, kept by dl_jobs' triggers: what the dashboard, /metrics, /status
# and the admin's filters show, without counting millions of rows.
JOB_COUNTS = RowCounts(
    table="dl_jobs", counts_table="dl_job_counts", columns=("queue", "task", "status"), batch_by="queue"
)


class Job(models.Model):
    job_id = models.UUIDField(primary_key=True, default=uuid7)
    queue = models.TextField()
    task = models.TextField()
    args = models.JSONField(default=dict, db_default={})
    idempotency_key = models.TextField(null=True, blank=True)
    lock_key = models.TextField()
    partition_key = models.TextField(default="", db_default="", blank=True)
    priority = models.IntegerField(default=100, db_default=100)
    available_at = models.DateTimeField(db_default=TransactionNow())
    status = PgEnumField(
        enum_type=DL_STATUS_TYPE, choices=JobStatus, default=JobStatus.QUEUED, db_default=JobStatus.QUEUED
    )
    attempt = models.IntegerField(default=0, db_default=0)
    max_attempts = models.IntegerField(default=5, db_default=5)
    lease_ttl_sec = models.IntegerField(default=60, db_default=60)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    cancel_requested = models.BooleanField(default=False, db_default=False)
    progress = models.JSONField(default=dict, db_default={})
    error = models.TextField(null=True, blank=True)
    producer = models.TextField(null=True, blank=True)
    consumer_group = models.TextField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=TransactionNow())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "dl_jobs"
        permissions = [("retry_job", "Can retry jobs"), ("cancel_job", "Can cancel jobs")]
        permissions += [("view_job_arguments", "Can view job arguments (secret values unmasked)")]
        verbose_name = "job"
        constraints = [
            models.UniqueConstraint(fields=["idempotency_key"], name="dl_jobs_idempotency_key_key"),
            models.CheckConstraint(
                condition=Q(priority__gte=0) & Q(attempt__gte=0) & Q(max_attempts__gte=0) & Q(lease_ttl_sec__gt=0),
                name="dl_jobs_chk_positive",
            ),
            # Extra: at most one running job per lock_key. This *is* the lock_key lock: it
            # lives in the rows, so it dies with the lease (no leaked lock when a worker
            # dies) and needs no session state (safe behind a transaction pooler).
            models.UniqueConstraint(
                fields=["lock_key"], condition=Q(status=JobStatus.RUNNING), name="ux_dl_jobs_running_lock_key"
            ),
        ]
        indexes = [
            # The seed's three indexes.
            models.Index(
                fields=["queue", "available_at", "priority", "created_at"],
                condition=Q(status=JobStatus.QUEUED),
                name="ix_dl_jobs_claim",
            ),
            models.Index(
                fields=["lease_expires_at"], condition=Q(status=JobStatus.RUNNING), name="ix_dl_jobs_running_lease"
            ),
            models.Index(fields=["status", "queue"], name="ix_dl_jobs_status_queue"),
            # Extra: running jobs by lock_key, for the claim's running-key probe (``claims.KEY_FREE``), spelled
            # as this predicate so the two above cannot serve it (walked whole after an ANALYZE under a held xmin).
            models.Index(
                fields=["lock_key"],
                condition=Q(NotDistinctFrom(F("status"), models.Value(JobStatus.RUNNING))),
                name="ix_dl_jobs_running_lock_key",
            ),
            # Extra: the claim's ORDER BY priority, created_at, job_id read in index order, so a
            # claim costs the same with 10,000 or 1,000,000 queued jobs.
            models.Index(
                fields=["queue", "priority", "created_at", "job_id"],
                include=["available_at"],
                condition=Q(status=JobStatus.QUEUED),
                name="ix_dl_jobs_claim_order",
            ),
            # Extra: each lock_key's queued jobs in claim order: is a job the first of its key
            # (keys run in order), and the claim's walk over a queue's keys.
            models.Index(
                fields=["queue", "lock_key", "priority", "created_at", "job_id"],
                condition=Q(status=JobStatus.QUEUED),
                name="ix_dl_jobs_queued_lock_key",
            ),
            # Extra: retention by age and the throughput chart read finished jobs by time.
            models.Index(fields=["finished_at"], condition=Q(finished_at__isnull=False), name="ix_dl_jobs_finished"),
            # Extra: created_at ranges. BRIN costs next to nothing to maintain: rows arrive in
            # created_at order. (Newest-first listings walk the primary key: job ids are UUIDv7.)
            BrinIndex(fields=["created_at"], name="ix_dl_jobs_created_brin"),
            # Extra: the lists' filters, each read newest first (job_id) or found at once when
            # nothing matches, at millions of jobs (the manual: operating/production-size.md).
            models.Index(fields=["queue", "job_id"], name="ix_dl_jobs_queue_job"),
            models.Index(fields=["task", "job_id"], name="ix_dl_jobs_task_job"),
            # A queue's or a task's jobs of one status, newest first: the walks above, filtering by
            # status, read a whole queue or task when few (or none) of its jobs have it (failed in
            # q07). Partial (states.LISTED_APART): a succeeded job leaves them, as a drain's jobs do.
            *(
                models.Index(
                    fields=[column, "status", "job_id"],
                    condition=Q(status__in=LISTED_APART),
                    name=f"ix_dl_jobs_{column}_status_job",
                )
                for column in ("queue", "task")
            ),
            models.Index(fields=["lock_key", "job_id"], name="ix_dl_jobs_lock_key_job"),
            models.Index(
                fields=["partition_key", "job_id"], condition=~Q(partition_key=""), name="ix_dl_jobs_partition_job"
            ),
            GinIndex(fields=["args"], opclasses=["jsonb_path_ops"], name="ix_dl_jobs_args"),  # args @> {...}
            # Retention's maxIdentical: a signature's finished jobs, newest first.
            models.Index(
                F("task"),
                F("queue"),
                MD5(Cast("args", output_field=models.TextField())),
                F("finished_at"),
                condition=Q(finished_at__isnull=False),
                name="ix_dl_jobs_signature",
            ),
            # The admin's error search reads the jobs with an error in a recent window (no pg_trgm:
            # the embedded server has none).
            models.Index(fields=["created_at"], condition=Q(error__isnull=False), name="ix_dl_jobs_errored"),
        ]
        triggers = [
            *statement_notify_triggers(
                name="dl_jobs_notify", body=partial(notify_ready_sql, channel=NOTIFY_CHANNEL, counts=JOB_COUNTS)
            ),
            *JOB_COUNTS.triggers(name="dl_jobs_count", operations=("del",)),  # inserts, updates: above
        ]

    def __str__(self) -> str:
        return f"{self.task} {self.job_id}"

    @property
    def is_finished(self) -> bool:
        return self.status in FINISHED

    @property
    def is_waiting(self) -> bool:
        """Queued, but waiting for other jobs (see ``jobs.queue.states``)."""
        return self.status == JobStatus.QUEUED and self.available_at == WAITING_AVAILABLE_AT

    @property
    def display_status(self) -> str:
        return shown_status(self.status, self.available_at)


class JobEvent(models.Model):
    event_id = BigSerialField(primary_key=True)
    # The constraint itself is added by the migration, exactly as the seed declares it.
    job = models.ForeignKey(
        Job, on_delete=models.DB_CASCADE, db_column="job_id", db_constraint=False, db_index=False, related_name="events"
    )
    queue = models.TextField()
    ts = models.DateTimeField(db_default=TransactionNow())
    kind = models.TextField(choices=EventKind)
    payload = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "dl_job_events"
        verbose_name = "job event"
        ordering = ["event_id"]
        indexes = [
            # Extra: one job's journal in order (events API, admin inline, cascade deletes).
            models.Index(fields=["job", "event_id"], name="ix_dl_job_events_job"),
            # Extra: the last hour's events (the dashboard's wait and run times). BRIN: events
            # arrive in ts order, so it costs next to nothing to maintain.
            BrinIndex(fields=["ts"], name="ix_dl_job_events_ts_brin"),
        ]
        triggers = [statement_trigger(name="dl_job_events_notify", operation=pgtrigger.Insert, func=EVENTS_NOTIFY)]

    def __str__(self) -> str:
        return f"{self.kind} #{self.event_id}"


class JobCount(models.Model):
    """Rows appended by dl_jobs' triggers (``JOB_COUNTS``): summed, they count the jobs of each
    queue, task and status; ``jobs.counts`` folds them now and then."""

    id = models.BigAutoField(primary_key=True)
    queue = models.TextField()
    task = models.TextField()
    status = PgEnumField(enum_type=DL_STATUS_TYPE, choices=JobStatus)
    n = models.BigIntegerField()

    class Meta:
        db_table = "dl_job_counts"

    def __str__(self) -> str:
        return f"{self.queue} {self.task} {self.status} {self.n:+d}"


class JobThroughput(models.Model):
    """Rows appended by dl_jobs' triggers (``jobs.queue.throughput``): summed, the jobs of each queue
    that finished in each status and minute (older: quarter hour or hour, at its start)."""

    id = models.BigAutoField(primary_key=True)
    queue = models.TextField()
    status = PgEnumField(enum_type=DL_STATUS_TYPE, choices=JobStatus)
    minute = models.DateTimeField()
    n = models.BigIntegerField()
    folded = models.BooleanField(default=False, db_default=False)  # false: appended, the fold's to sum

    class Meta:
        db_table = "dl_job_throughput"
        indexes = [
            models.Index(fields=["minute"], name="ix_dl_job_throughput_minute"),  # windows, aging, retention
            models.Index(fields=["minute"], condition=Q(folded=False), name="ix_dl_job_throughput_appended"),
        ]

    def __str__(self) -> str:
        return f"{self.queue} {self.status} {self.minute:%Y-%m-%d %H:%M} {self.n:+d}"


class JobDependency(models.Model):
    """``job`` waits for ``upstream`` (see ``jobs.queue.dependency_rules``). A job's rows share run_anyway
    and requested_available_at."""

    pk = models.CompositePrimaryKey("job", "upstream")
    job = models.ForeignKey(
        Job, on_delete=models.DB_CASCADE, db_column="job_id", db_index=False, related_name="upstream_links"
    )
    upstream = models.ForeignKey(
        Job, on_delete=models.DB_CASCADE, db_column="upstream_id", related_name="downstream_links"
    )
    run_anyway = models.BooleanField(default=False, help_text="Run once every upstream job finished, whatever its end.")
    requested_available_at = models.DateTimeField(null=True, blank=True, help_text="The producer's available_at.")
    canceled_it = models.BooleanField(
        default=False, help_text="This upstream job's end canceled the job: retrying it brings the job back."
    )

    class Meta:
        db_table = "dl_job_dependencies"
        verbose_name = "job dependency"

    def __str__(self) -> str:
        return f"{self.job_id} after {self.upstream_id}"


class Worker(models.Model):
    """A live (or recently live) ``runworker`` process; it refreshes heartbeat_at."""

    worker_id = models.UUIDField(primary_key=True)
    hostname = models.TextField()
    pid = models.IntegerField()
    queues = models.JSONField(default=dict, help_text="Queue → concurrency.")
    started_at = models.DateTimeField(db_default=TransactionNow())
    heartbeat_at = models.DateTimeField(db_default=TransactionNow())
    running_jobs = models.IntegerField(default=0)
    # The release the worker runs, so that a rollout shows which workers are old and new. Workers of
    # 0.1.0 did not say: their rows take ''.
    version = models.TextField(db_default="", blank=True)

    class Meta:
        db_table = "dl_workers"
        ordering = ["hostname", "pid"]

    def __str__(self) -> str:
        return f"{self.hostname}:{self.pid}"


class PeriodicTask(models.Model):
    """The shared schedule of a periodic task (reaper, retention, ...): one row per task.

    Every runworker (and runreaper) may run these tasks; the row says when one last did, so
    each runs once per period across all processes, and an advisory lock held while it runs
    keeps two from running it at once.
    """

    name = models.TextField(primary_key=True)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    last_runner = models.TextField(blank=True, default="")
    last_result = models.JSONField(default=dict, blank=True)

    class Meta:
        db_table = "dl_periodic_tasks"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Queue(models.Model):
    """A queue's operator state. Queues exist by being named in jobs; a row appears when an
    operator first pauses one or sets its limits."""

    name = models.TextField(primary_key=True)
    paused = models.BooleanField(default=False)
    # Limits (``jobs.queue.services.claims.jobs_claim_limited`` enforces them): at most ``max_running``
    # running, at most ``rate_limit`` started per ``rate_period_sec``; per partition_key with
    # ``limit_per_partition``.
    max_running = models.IntegerField(null=True, blank=True)
    rate_limit = models.IntegerField(null=True, blank=True)
    rate_period_sec = models.IntegerField(null=True, blank=True)
    limit_per_partition = models.BooleanField(default=False, db_default=False)
    changed_at = models.DateTimeField(db_default=TransactionNow())
    changed_by = models.TextField(blank=True, default="")

    class Meta:
        db_table = "dl_queues"
        permissions = [("pause_queue", "Can pause and resume queues"), ("limit_queue", "Can change queue limits")]
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=(Q(max_running__isnull=True) | Q(max_running__gte=1))
                & (
                    Q(rate_limit__isnull=True, rate_period_sec__isnull=True)
                    | Q(rate_limit__gte=1, rate_period_sec__gte=1)
                ),
                name="dl_queues_chk_limits",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class QueueStart(models.Model):
    """One claim of a job of a rate-limited queue (the rate limit counts these); written and
    pruned by the limited claim only."""

    id = models.BigAutoField(primary_key=True)
    queue = models.TextField()
    partition_key = models.TextField()
    started_at = models.DateTimeField()

    class Meta:
        db_table = "dl_queue_starts"
        indexes = [models.Index(fields=["queue", "started_at"], name="ix_dl_queue_starts")]

    def __str__(self) -> str:
        return f"{self.queue} {self.started_at}"
