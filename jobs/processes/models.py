"""Durable processes (seed 001, progressor): one set of tables for every namespace.

A process is driven by its namespace's processor, one task at a time: ``dl_proc_tasks`` is
the history of every task (init, call, repair, timeout, remove, notify), ``dl_proc_schedule``
holds the tasks waiting for their time or blocked behind a call, ``dl_proc_running`` the task
each process runs now (its primary key on the process is the guarantee that a process runs
at most one task, whoever claims), and ``dl_proc_events`` the events processors emitted.
"""

from datetime import timedelta

from django.db import models
from django.db.models import ExpressionWrapper, Q
from django.db.models.functions import Length, Now
from django.db.models.lookups import Range

from pipeline_project.db.counts import RowCounts

PROCESS_STATUSES = ("init", "running", "error")
TASK_TYPES = ("init", "call", "repair", "timeout", "remove", "notify")
TASK_STATUSES = ("waiting", "running", "blocked", "error", "finished", "cancelled")
CALL_TYPES = ("init", "call", "repair")  # tasks a client waits for
TIMER_TYPES = ("timeout", "remove")

# NOTIFY channels: work for a namespace (payload: namespace), a task ended (payload: task id).
WORK_CHANNEL = "dl_proc_work"
TASK_DONE_CHANNEL = "dl_proc_task_done"

MAX_PROCESS_ID_CHARS = 256
MAX_IDEMPOTENCY_KEY_CHARS = 1024
MAX_IDEMPOTENCY_KEY_BYTES = 2048  # a unique btree index entry holds about 2,700
MAX_EVENT_ID = 2**31 - 1  # event ids are PostgreSQL integers
DEFAULT_STEP_TIMEOUT_SEC = 60.0  # a namespace's process_step_timeout unless it names one


def _one_of(field: str, values: tuple[str, ...], name: str) -> models.CheckConstraint:
    return models.CheckConstraint(condition=Q(**{f"{field}__in": values}), name=name)


# Processes per namespace and status, kept by dl_processes' triggers: the namespaces' counts
# without counting a million processes.
PROCESS_COUNTS = RowCounts(
    table="dl_processes", counts_table="dl_process_counts", columns=("namespace", "status"), batch_by="namespace"
)


def process_audit_id(*, namespace: str, process_id: str) -> str:
    """How the audit trail names a process: by its namespace and id, as the API does."""
    return f"{namespace}/{process_id}"


class Process(models.Model):
    id = models.BigAutoField(primary_key=True)
    namespace = models.TextField()
    process_id = models.TextField()
    status = models.TextField()
    previous_status = models.TextField(null=True, blank=True)
    status_changed_at = models.DateTimeField()
    detail = models.TextField(null=True, blank=True)
    aux_state = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    # The task whose failure put the process in error (a plain id: tasks reference processes).
    corrupted_by = models.BigIntegerField(null=True, blank=True)
    last_event_id = models.IntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "dl_processes"
        verbose_name_plural = "processes"  # not Django's "processs"
        permissions = [("repair_process", "Can repair processes")]
        constraints = [
            models.UniqueConstraint(fields=["namespace", "process_id"], name="ux_dl_processes_ns_id"),
            _one_of("status", PROCESS_STATUSES, "dl_processes_status"),
            models.CheckConstraint(
                condition=Q(Range(Length("process_id"), (1, MAX_PROCESS_ID_CHARS))), name="dl_processes_id_length"
            ),
        ]
        indexes = [
            models.Index(fields=["namespace", "status"], name="ix_dl_processes_ns_status"),
            # The admin's status filter, newest first, at a million processes.
            models.Index(fields=["status", "id"], name="ix_dl_processes_status"),
        ]
        triggers = PROCESS_COUNTS.triggers(name="dl_processes_count")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.process_id}"


class ProcessCount(models.Model):
    """Rows appended by dl_processes' triggers (``PROCESS_COUNTS``): summed, the processes of each
    namespace and status."""

    id = models.BigAutoField(primary_key=True)
    namespace = models.TextField()
    status = models.TextField()
    n = models.BigIntegerField()

    class Meta:
        db_table = "dl_process_counts"

    def __str__(self) -> str:
        return f"{self.namespace} {self.status} {self.n:+d}"


class Task(models.Model):
    task_id = models.BigAutoField(primary_key=True)
    process = models.ForeignKey(Process, on_delete=models.CASCADE, related_name="tasks", db_column="process_pk")
    task_type = models.TextField()
    status = models.TextField()
    scheduled_time = models.DateTimeField()
    running_time = models.DateTimeField(null=True, blank=True)
    finished_time = models.DateTimeField(null=True, blank=True)
    args = models.JSONField(null=True, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    idempotency_key = models.TextField(null=True, blank=True, unique=True)
    response = models.JSONField(null=True, blank=True)
    blocked_task = models.BigIntegerField(null=True, blank=True)
    last_retry_interval = models.FloatField(default=0)
    attempts_count = models.IntegerField(default=0)
    context = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "dl_proc_tasks"
        constraints = [
            _one_of("task_type", TASK_TYPES, "dl_proc_tasks_type"),
            _one_of("status", TASK_STATUSES, "dl_proc_tasks_status"),
        ]
        indexes = [models.Index(fields=["process", "task_id"], name="ix_dl_proc_tasks_process")]


class Schedule(models.Model):
    """Tasks waiting for their time (or, for calls, for the running task to end), and blocked timers."""

    task = models.OneToOneField(Task, on_delete=models.CASCADE, primary_key=True, db_column="task_id")
    process = models.ForeignKey(Process, on_delete=models.CASCADE, db_column="process_pk", related_name="+")
    namespace = models.TextField()
    task_type = models.TextField()
    status = models.TextField()  # waiting | blocked
    scheduled_time = models.DateTimeField()

    class Meta:
        db_table = "dl_proc_schedule"
        constraints = [
            _one_of("status", ("waiting", "blocked"), "dl_proc_schedule_status"),
            _one_of("task_type", TASK_TYPES, "dl_proc_schedule_type"),
        ]
        indexes = [
            # the claim: a namespace's due tasks in time order
            models.Index(
                fields=["namespace", "scheduled_time", "task"],
                condition=Q(status="waiting"),
                name="ix_dl_proc_schedule_due",
            ),
            models.Index(fields=["process"], name="ix_dl_proc_schedule_process"),
        ]


class Running(models.Model):
    """The task each process runs now: at most one (the primary key is the process)."""

    process = models.OneToOneField(Process, on_delete=models.CASCADE, primary_key=True, db_column="process_pk")
    task = models.OneToOneField(Task, on_delete=models.CASCADE, db_column="task_id", related_name="+")
    namespace = models.TextField()
    task_type = models.TextField()
    running_time = models.DateTimeField()
    # When the task should have ended: its claim plus its namespace's step timeout, written by
    # the claim so that any worker can collect it as a zombie without knowing its namespace.
    # (A row written without one, by a worker from before this column, gets the default.)
    deadline = models.DateTimeField(
        db_default=ExpressionWrapper(
            Now() + timedelta(seconds=DEFAULT_STEP_TIMEOUT_SEC), output_field=models.DateTimeField()
        )
    )
    worker = models.TextField()

    class Meta:
        db_table = "dl_proc_running"
        indexes = [models.Index(fields=["deadline"], name="ix_dl_proc_running_deadline")]


class Event(models.Model):
    id = models.BigAutoField(primary_key=True)
    process = models.ForeignKey(Process, on_delete=models.CASCADE, db_column="process_pk", related_name="events")
    task = models.ForeignKey(Task, on_delete=models.CASCADE, db_column="task_id", related_name="events")
    event_id = models.IntegerField()
    timestamp = models.DateTimeField()
    metadata = models.JSONField(null=True, blank=True)
    payload = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "dl_proc_events"
        constraints = [models.UniqueConstraint(fields=["process", "event_id"], name="ux_dl_proc_events_process_event")]
