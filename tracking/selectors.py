"""Reads of pipeline_tracking."""

from datetime import datetime

from django.db.models import QuerySet

from pipeline_project.api.errors import NotFoundError
from tracking.models import QUEUE_STAGES, STAGES, TRACKING_COUNTS, PipelineTracking, Stage, Status

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


def counts() -> list[tuple]:
    """``(shard, *stage statuses, rows)`` for each combination with rows: read from the counts the
    triggers keep (``tracking.models.TRACKING_COUNTS``), not counted."""
    return TRACKING_COUNTS.read()


def shards() -> list[int]:
    return sorted({shard for shard, *_rest in counts()})


def metrics_summary() -> dict:
    """Counts per stage and status, and per shard: total, done (through mysql-sender), failed (at any stage)."""
    by_stage = {stage.key: dict.fromkeys(Status.values, 0) for stage in STAGES.values()}
    by_shard: dict[int, dict] = {}
    for shard, *statuses, rows in counts():
        for stage, status in zip(STAGES.values(), statuses, strict=True):
            by_stage[stage.key][status] += rows
        totals = by_shard.setdefault(shard, {"shard": shard, "total": 0, "done": 0, "failed": 0})
        totals["total"] += rows
        totals["done"] += rows if statuses[-1] == Status.DONE else 0
        totals["failed"] += rows if Status.FAILED in statuses else 0
    return {
        "total": sum(shard["total"] for shard in by_shard.values()),
        "by_stage": by_stage,
        "by_shard": [by_shard[shard] for shard in sorted(by_shard)],
    }


def rows_of_files(*, filenames: list[str] | tuple[str, ...]) -> QuerySet[PipelineTracking]:
    """The rows of the files ``filenames`` (every shard; the router reads them from the pipeline database)."""
    return PipelineTracking.objects.filter(filename__in=filenames)
