from dataclasses import dataclass

import pgtrigger
from django.db import models
from django.db.models.functions import Now

from pipeline_project.db.counts import RowCounts
from pipeline_project.db.triggers import statement_notify_triggers, statement_trigger


class Status(models.TextChoices):
    NEW = "new"
    STARTED = "started"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: its URL slug, its status column and the stage it waits for."""

    slug: str
    column: str
    previous_column: str | None

    @property
    def key(self) -> str:
        """The name used in JSON summaries (``shard_worker``)."""
        return self.column.removesuffix("_status")

    @property
    def ready_filter(self) -> dict:
        """Rows a daemon of this stage may take: previous stage done, this one new."""
        return {self.previous_column: Status.DONE, self.column: Status.NEW}


STAGES: dict[str, Stage] = {
    stage.slug: stage
    for stage in (
        Stage("event-ingest", "event_ingest_status", None),
        Stage("shard-splitter", "shard_splitter_status", "event_ingest_status"),
        Stage("shard-worker", "shard_worker_status", "shard_splitter_status"),
        Stage("mysql-sender", "mysql_sender_status", "shard_worker_status"),
    )
}
# Stages with a queue, a claim and the start/done/fail/retry transitions.
QUEUE_STAGES = {slug: stage for slug, stage in STAGES.items() if stage.previous_column}

READY_CHANNEL = "pipeline_tracking_ready"


def _ready_notify_sql(compare_with_old: bool) -> str:
    """Statement-level trigger body: NOTIFY once per stage for which the statement made rows ready.

    A row is ready for a stage when the previous stage is ``done`` and the stage is ``new``.
    After an UPDATE only rows that were not ready before count; after an INSERT every ready row does.
    """
    checks = []
    for stage in QUEUE_STAGES.values():
        ready = f"n.{stage.previous_column} = 'done' AND n.{stage.column} = 'new'"
        if compare_with_old:
            was_ready = f"o.{stage.previous_column} = 'done' AND o.{stage.column} = 'new'"
            rows = f"new_values n JOIN old_values o ON o.id = n.id WHERE {ready} AND NOT ({was_ready})"
        else:
            rows = f"new_values n WHERE {ready}"
        checks.append(f"SELECT '{stage.slug}' AS stage WHERE EXISTS (SELECT 1 FROM {rows})")
    return (
        f"PERFORM pg_notify('{READY_CHANNEL}', stage) FROM ({' UNION ALL '.join(checks)}) AS became_ready; RETURN NULL;"
    )


STAGE_HISTORY_TABLE = "pipeline_tracking_history"


def _stage_history_sql() -> str:
    """Statement-level AFTER UPDATE trigger body: one history row per stage status a statement
    changed. (Not on INSERT: registration is the API's busiest write, and a row's first
    statuses are those it was created with, at ``created_at``.)"""
    changes = [
        f"SELECT n.id, '{stage.slug}', n.{stage.column} FROM new_values n JOIN old_values o ON o.id = n.id"
        f" WHERE n.{stage.column} IS DISTINCT FROM o.{stage.column}"
        for stage in STAGES.values()
    ]
    return f"INSERT INTO {STAGE_HISTORY_TABLE} (row_id, stage, status) {' UNION ALL '.join(changes)}; RETURN NULL;"


def _status_field():
    return models.CharField(max_length=8, choices=Status, default=Status.NEW, db_default=Status.NEW)


# Rows per shard and combination of stage statuses, kept by pipeline_tracking's triggers: the
# summary and the admin's counts, without counting millions of rows.
TRACKING_COUNTS = RowCounts(
    table="pipeline_tracking",
    counts_table="pipeline_tracking_counts",
    columns=("shard", *(stage.column for stage in STAGES.values())),
    alias="pipeline",
)


class PipelineTracking(models.Model):
    filename = models.CharField(max_length=255)
    shard = models.IntegerField()
    event_ingest_status = _status_field()
    shard_splitter_status = _status_field()
    shard_worker_status = _status_field()
    mysql_sender_status = _status_field()
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = "pipeline_tracking"
        verbose_name = "pipeline tracking row"
        constraints = [
            models.UniqueConstraint(fields=["filename", "shard"], name="uq_filename_shard"),
            models.CheckConstraint(condition=models.Q(shard__gte=0), name="pipeline_tracking_shard_non_negative"),
            *(
                models.CheckConstraint(
                    condition=models.Q(**{f"{stage.column}__in": Status.values}),
                    name=f"pipeline_tracking_{stage.key}_status_valid",
                )
                for stage in STAGES.values()
            ),
        ]
        indexes = [
            # One partial index per queue: the queue read, its updated_since filter and the
            # claim walk it in order and never touch rows that are not ready.
            *(
                models.Index(
                    fields=["created_at", "id", "updated_at"],
                    condition=models.Q(**stage.ready_filter),
                    name=f"ix_trk_ready_{stage.key}",
                )
                for stage in QUEUE_STAGES.values()
            ),
            # Admin search by filename prefix.
            models.Index(fields=["filename"], opclasses=["varchar_pattern_ops"], name="ix_tracking_filename_prefix"),
            # The admin's filters by a stage's status, newest first: the rows not done yet at a
            # stage are few (those done are most rows: the list walks them by id).
            *(
                models.Index(
                    fields=[stage.column, "id"],
                    condition=~models.Q(**{stage.column: Status.DONE}),
                    name=f"ix_trk_not_done_{stage.key}",
                )
                for stage in STAGES.values()
            ),
        ]
        triggers = [
            *statement_notify_triggers(name="notify_ready", body=_ready_notify_sql),
            statement_trigger(name="stage_history_upd", operation=pgtrigger.Update, func=_stage_history_sql()),
            *TRACKING_COUNTS.triggers(name="tracking_count"),
        ]

    def __str__(self) -> str:
        return f"{self.filename}#{self.shard}"


class TrackingCount(models.Model):
    """Rows appended by pipeline_tracking's triggers (``TRACKING_COUNTS``): summed, they count the
    rows of each shard and combination of stage statuses."""

    id = models.BigAutoField(primary_key=True)
    shard = models.IntegerField()
    event_ingest_status = models.CharField(max_length=8, choices=Status)
    shard_splitter_status = models.CharField(max_length=8, choices=Status)
    shard_worker_status = models.CharField(max_length=8, choices=Status)
    mysql_sender_status = models.CharField(max_length=8, choices=Status)
    n = models.BigIntegerField()

    class Meta:
        db_table = "pipeline_tracking_counts"

    def __str__(self) -> str:
        return f"shard {self.shard} {self.n:+d}"


class StageChange(models.Model):
    """A row's stage status as a statement set it: the row's stage history (trigger-written)."""

    id = models.BigAutoField(primary_key=True)
    row = models.ForeignKey(PipelineTracking, on_delete=models.DB_CASCADE, related_name="stage_changes")
    stage = models.CharField(max_length=32)
    status = models.CharField(max_length=8, choices=Status)
    changed_at = models.DateTimeField(db_default=Now())

    class Meta:
        db_table = STAGE_HISTORY_TABLE
        ordering = ["id"]
        indexes = [models.Index(fields=["row", "id"], name="ix_tracking_history_row")]

    def __str__(self) -> str:
        return f"{self.stage} {self.status}"
