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


# A shard's status at a stage is its worst row's there: one failed row makes the shard failed.
WORST_FIRST = (Status.FAILED, Status.STARTED, Status.NEW, Status.DONE)


def shards_summary(*, worst: int) -> dict:
    """The shards (of every file: the counts are kept per shard) in a few numbers: how many there
    are; per stage, how many are in each status (their worst row's); and the ``worst`` of them,
    most failed rows first, then most rows not through mysql-sender; each with its rows' total,
    done and failed. Read from the counts, whatever the shards hold."""
    by_shard = metrics_summary()["by_shard"]
    worst_status: dict[tuple[int, str], int] = {}
    for shard, *statuses, _rows in counts():
        for stage, status in zip(STAGES.values(), statuses, strict=True):
            rank = WORST_FIRST.index(status)
            worst_status[shard, stage.key] = min(rank, worst_status.get((shard, stage.key), rank))
    by_stage = {stage.key: dict.fromkeys(Status.values, 0) for stage in STAGES.values()}
    for (_shard, stage_key), rank in worst_status.items():
        by_stage[stage_key][WORST_FIRST[rank]] += 1
    unfinished = [shard for shard in by_shard if shard["done"] < shard["total"]]
    unfinished.sort(key=lambda shard: (-shard["failed"], shard["done"] - shard["total"], shard["shard"]))
    return {
        "shards": len(by_shard),
        "unfinished": len(unfinished),
        "by_stage": by_stage,
        "worst": unfinished[:worst],
    }


def shards_most_failed(*, limit: int) -> list[tuple[int, int]]:
    """``(shard, failed rows)`` of the shards with failed rows (at any stage), most first, at most ``limit``."""
    failed = [(shard["shard"], shard["failed"]) for shard in metrics_summary()["by_shard"] if shard["failed"]]
    return sorted(failed, key=lambda pair: (-pair[1], pair[0]))[:limit]


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
