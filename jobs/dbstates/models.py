"""The engine's metadata (sqlrs keeps it in SQLite; here, in the project's database).

Prepare jobs with their tasks and events (the queue store, seed 1.3), states (snapshots in
the state store, a tree through ``parent``), instances (servers started from a state),
names bound to instances, the engine's config document and cache evictions.
"""

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from pipeline_project.db.constraints import one_of
from pipeline_project.db.triggers import statement_trigger

EVENTS_CHANNEL = "sqlrs_events"  # payload: ids of prepare jobs with new events, comma-separated


class PrepareStatus(models.TextChoices):
    """A prepare job's or a prepare task's status (sqlrs's; the queue's jobs have JobStatus)."""

    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


TERMINAL_STATUSES = (PrepareStatus.SUCCEEDED, PrepareStatus.FAILED)


class TaskType(models.TextChoices):
    PLAN = "plan"
    RESOLVE_IMAGE = "resolve_image"
    STATE_EXECUTE = "state_execute"
    PREPARE_INSTANCE = "prepare_instance"


class EventType(models.TextChoices):
    STATUS = "status"
    TASK = "task"
    LOG = "log"
    RESULT = "result"
    ERROR = "error"


class InstanceStatus(models.TextChoices):
    ACTIVE = "active"
    EXPIRED = "expired"
    ORPHANED = "orphaned"


class PrepareJob(models.Model):
    job_id = models.CharField(primary_key=True, max_length=32)
    status = models.CharField(max_length=16, choices=PrepareStatus, default=PrepareStatus.QUEUED)
    prepare_kind = models.CharField(max_length=16)
    image_id = models.TextField()
    resolved_image_id = models.TextField(blank=True, default="")
    plan_only = models.BooleanField(default=False)
    # What was asked (args, stdin): the job is planned from it when it runs, and again on resume.
    request = models.JSONField()
    prepare_args_normalized = models.TextField(blank=True, default="")
    signature = models.CharField(max_length=64, blank=True, default="")
    queue_job_id = models.UUIDField(null=True, blank=True)  # the dl_jobs row that runs it
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_prepare_jobs"
        ordering = ["created_at", "job_id"]
        indexes = [models.Index(fields=["signature", "finished_at"], name="ix_sqlrs_jobs_signature")]
        constraints = [one_of("status", PrepareStatus, "sqlrs_prepare_jobs")]

    def __str__(self) -> str:
        return self.job_id

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class PrepareTask(models.Model):
    job = models.ForeignKey(PrepareJob, on_delete=models.CASCADE, related_name="tasks")
    position = models.PositiveSmallIntegerField()
    task_id = models.CharField(max_length=32)
    type = models.CharField(max_length=20, choices=TaskType)
    status = models.CharField(max_length=16, choices=PrepareStatus, default=PrepareStatus.QUEUED)
    planner_kind = models.CharField(max_length=16, blank=True, default="")
    image_id = models.TextField(blank=True, default="")
    resolved_image_id = models.TextField(blank=True, default="")
    input_kind = models.CharField(max_length=8, blank=True, default="")
    input_id = models.TextField(blank=True, default="")
    task_hash = models.CharField(max_length=64, blank=True, default="")
    output_state_id = models.CharField(max_length=64, blank=True, default="")
    cached = models.BooleanField(null=True, blank=True)
    instance_mode = models.CharField(max_length=16, blank=True, default="")
    args_summary = models.TextField(blank=True, default="")
    changeset_id = models.TextField(blank=True, default="")  # lb steps: the changeset they apply
    changeset_author = models.TextField(blank=True, default="")
    changeset_path = models.TextField(blank=True, default="")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_tasks"
        ordering = ["job", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "task_id"], name="sqlrs_tasks_job_task_uniq"),
            one_of("type", TaskType, "sqlrs_tasks"),
            one_of("status", PrepareStatus, "sqlrs_tasks"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id}/{self.task_id}"


def _notify_events_sql() -> str:
    return f"PERFORM pg_notify('{EVENTS_CHANNEL}', string_agg(DISTINCT job_id, ',')) FROM new_values; RETURN NULL;"


class PrepareEvent(models.Model):
    id = models.BigAutoField(primary_key=True)
    job = models.ForeignKey(PrepareJob, on_delete=models.CASCADE, related_name="events")
    seq = models.PositiveIntegerField()  # 0-based position in the job's stream (Range: events=N-)
    type = models.CharField(max_length=8, choices=EventType)
    ts = models.DateTimeField(db_default=Now())
    task_id = models.CharField(max_length=32, blank=True, default="")
    status = models.CharField(max_length=16, blank=True, default="")
    message = models.TextField(blank=True, default="")
    result = models.JSONField(null=True, blank=True)
    error = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_events"
        ordering = ["job", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["job", "seq"], name="sqlrs_events_job_seq_uniq"),
            one_of("type", EventType, "sqlrs_events"),
        ]
        triggers = [
            statement_trigger(name="sqlrs_events_notify", operation=pgtrigger.Insert, func=_notify_events_sql())
        ]

    def __str__(self) -> str:
        return f"{self.job_id}#{self.seq} {self.type}"


class State(models.Model):
    """A snapshot in the state store: the data directory after one step on its parent (or on the image)."""

    state_id = models.CharField(primary_key=True, max_length=64)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    image_id = models.TextField()  # resolved
    engine_version = models.CharField(max_length=32)  # where it lives: engines/postgres/<version>/states
    prepare_kind = models.CharField(max_length=16)
    prepare_args_normalized = models.TextField()
    task_hash = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField(default=0)
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)
    use_count = models.BigIntegerField(default=0)
    min_retention_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_states"
        ordering = ["created_at", "state_id"]

    def __str__(self) -> str:
        return self.state_id[:12]


class Instance(models.Model):
    instance_id = models.CharField(primary_key=True, max_length=32)
    state = models.ForeignKey(State, on_delete=models.PROTECT, related_name="instances")
    image_id = models.TextField()  # resolved
    job = models.ForeignKey(PrepareJob, null=True, blank=True, on_delete=models.SET_NULL, related_name="instances")
    status = models.CharField(max_length=16, choices=InstanceStatus, default=InstanceStatus.ACTIVE)
    port = models.PositiveIntegerField(null=True, blank=True)
    pid = models.PositiveIntegerField(null=True, blank=True)
    runtime_dir = models.TextField()
    created_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_instances"
        ordering = ["created_at", "instance_id"]
        constraints = [one_of("status", InstanceStatus, "sqlrs_instances")]

    def __str__(self) -> str:
        return self.instance_id

    @property
    def dsn(self) -> str:
        return f"postgres://sqlrs@127.0.0.1:{self.port}/postgres" if self.port else ""


class Name(models.Model):
    """A name bound to an instance (``sqlrs`` users refer to instances by name in runs)."""

    name = models.CharField(primary_key=True, max_length=128)
    instance = models.ForeignKey(Instance, null=True, blank=True, on_delete=models.SET_NULL, related_name="names")
    state_id = models.CharField(max_length=64)
    image_id = models.TextField()
    created_at = models.DateTimeField(db_default=Now())
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "sqlrs_names"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class EngineConfig(models.Model):
    """The engine's config document (sqlrs's config.json): one row."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    document = models.JSONField(default=dict)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "sqlrs_config"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="sqlrs_config_one_row")]


class CacheEviction(models.Model):
    completed_at = models.DateTimeField(db_default=Now())
    trigger = models.CharField(max_length=32)
    evicted_count = models.IntegerField()
    freed_bytes = models.BigIntegerField()
    blocked_count = models.IntegerField()
    reclaimable_bytes = models.BigIntegerField()
    usage_bytes_before = models.BigIntegerField()
    usage_bytes_after = models.BigIntegerField()
    free_bytes_before = models.BigIntegerField()
    free_bytes_after = models.BigIntegerField()

    class Meta:
        db_table = "sqlrs_cache_evictions"
        ordering = ["-completed_at"]


class EngineHost(models.Model):
    """Where the engine lives (one row): the state store's engine id and the host it is on, written
    by the first worker that serves the engine's queue; workers elsewhere refuse to serve it
    (``jobs.dbstates.engine.placement``)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    engine_id = models.CharField(max_length=64)
    hostname = models.CharField(max_length=255)
    state_store = models.TextField()
    recorded_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "sqlrs_engine_host"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="sqlrs_engine_host_one_row")]
