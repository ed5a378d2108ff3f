"""Reads of pipeline_tracking."""

import operator
from datetime import datetime
from functools import reduce

from django.db.models import Count, Q

from pipeline_project.core.errors import NotFoundError
from tracking.models import QUEUE_STAGES, STAGES, PipelineTracking, Stage, Status

STATUS_COLUMNS = [stage.column for stage in STAGES.values()]


def stage_get(*, slug: str, queue_only: bool = True) -> Stage:
    """The stage named in a URL, or a 404 that lists the known ones."""
    stages = QUEUE_STAGES if queue_only else STAGES
    if slug not in stages:
        raise NotFoundError(f"Unknown stage {slug!r}.", code="unknown_stage", details={"stages": list(stages)})
    return stages[slug]


def queue_list(*, stage: Stage, limit: int, offset: int = 0, updated_since: datetime | None = None) -> list[dict]:
    """Rows ready for ``stage``, oldest first (served by the stage's partial index)."""
    rows = PipelineTracking.objects.filter(**stage.ready_filter)
    if updated_since is not None:
        rows = rows.filter(updated_at__gte=updated_since)
    return list(rows.order_by("created_at", "id").values("filename", "shard", "created_at")[offset : offset + limit])


def file_statuses(*, filename: str) -> list[dict]:
    rows = list(
        PipelineTracking.objects.filter(filename=filename)
        .order_by("shard")
        .values("shard", *STATUS_COLUMNS, "updated_at")
    )
    if not rows:
        raise NotFoundError(f"File {filename!r} is not registered.", details={"filename": filename})
    return rows


def metrics_summary() -> dict:
    """Counts per stage and status, and per shard: total, done (through mysql-sender), failed (at any stage)."""
    per_status = {
        f"{stage.key}__{status}": Count("id", filter=Q(**{stage.column: status}))
        for stage in STAGES.values()
        for status in Status.values
    }
    totals = PipelineTracking.objects.aggregate(total=Count("id"), **per_status)
    failed_anywhere = reduce(operator.or_, (Q(**{column: Status.FAILED}) for column in STATUS_COLUMNS))
    by_shard = (
        PipelineTracking.objects.values("shard")
        .annotate(
            total=Count("id"),
            done=Count("id", filter=Q(mysql_sender_status=Status.DONE)),
            failed=Count("id", filter=failed_anywhere),
        )
        .order_by("shard")
    )
    return {
        "total": totals["total"],
        "by_stage": {
            stage.key: {status: totals[f"{stage.key}__{status}"] for status in Status.values}
            for stage in STAGES.values()
        },
        "by_shard": list(by_shard),
    }
