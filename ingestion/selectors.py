"""Reads of ingestion runs and items."""

import uuid
from collections.abc import Iterable

from django.db.models import Count, Exists, OuterRef, Q, QuerySet, Subquery, TextField, Value
from django.db.models.functions import Cast, Coalesce, Concat

from ingestion.models import (
    ACTIVE_RUN_STATUSES,
    ENDED_RUN_STATUSES,
    IS_PROBLEM,
    ITEM_TYPE_OF_STAGE,
    TYPE_MATCHES_STAGE,
    IngestionItem,
    IngestionRun,
    ItemStage,
    ItemStatus,
    RunStageCount,
)
from ingestion.stats import STATS_SHAPE
from jobs.queue.selectors import job_counts_with_args, jobs_with_args
from jobs.queue.states import LIVE, JobStatus
from pipeline_project.api.errors import NotFoundError

PROBLEM_STATUSES = (ItemStatus.FAILED, ItemStatus.REVIEW_REQUIRED)
STAGE_LABELS = {ItemStage.DISCOVERY: "Discovery", ItemStage.DOCUMENTS: "Documents", ItemStage.OCR: "OCR"}
LIST_LIMIT = 25  # items per list on a run's page (a run may have 100,000); the admin lists them all
JOBS_COUNTED = 1000  # a run's jobs of each status are counted up to this many: more shows as "1000+"


def run_list(*, status: Iterable[str] = (), source: int | None = None) -> QuerySet[IngestionRun]:
    """Runs with their source; of these statuses and this source when given."""
    runs = IngestionRun.objects.select_related("source")
    return runs.filter(**_given(status__in=list(status) or None, source_id=source))


def run_get(*, run_id: uuid.UUID) -> IngestionRun:
    run = run_list().filter(id=run_id).first()
    if run is None:
        raise NotFoundError(f"run {run_id} not found", code="run_not_found")
    return run


def item_list(
    *,
    run: uuid.UUID | None = None,
    source: int | None = None,
    stage: str | None = None,
    item_type: str | None = None,
    status: Iterable[str] = (),
    needs_review: bool | None = None,
) -> QuerySet[IngestionItem]:
    """Items of this run, source, stage, type, these statuses and review flag, when given."""
    return IngestionItem.objects.filter(
        **_given(
            run_id=run,
            source_id=source,
            stage=stage,
            item_type=item_type,
            status__in=list(status) or None,
            needs_review=needs_review,
        )
    )


def _given(**lookups) -> dict:
    """The lookups of the filters given (None: not given)."""
    return {lookup: value for lookup, value in lookups.items() if value is not None}


def runs_active() -> QuerySet[IngestionRun]:
    return run_list().filter(status__in=ACTIVE_RUN_STATUSES).order_by("-created_at")


def runs_history(*, source_id: int | None = None, status: str | None = None) -> QuerySet[IngestionRun]:
    runs = run_list().filter(status__in=ENDED_RUN_STATUSES).order_by("-created_at")
    if source_id is not None:
        runs = runs.filter(source_id=source_id)
    if status is not None:
        runs = runs.filter(status=status)
    return runs


def run_stage_counts(*, run: IngestionRun) -> dict[str, dict]:
    """Per stage with items: how many by status, in all, when the first came and when one last
    changed; read from the counts the items' triggers keep (``ingestion_run_counts``)."""
    stages: dict[str, dict] = {}
    for count in RunStageCount.objects.filter(run=run):
        stage = stages.setdefault(count.stage, {"stage": count.stage, "items": 0, "by_status": {}, "first": None})
        stage["items"] += count.items
        stage["by_status"][count.status] = count.items
        stage["first"] = min(filter(None, [stage["first"], count.first_at]))
        stage["last"] = max(filter(None, [stage.get("last"), count.changed_at]))
    return stages


def run_stage_items(*, run: IngestionRun, counts: dict[str, dict]) -> dict[str, dict]:
    """The Discovery, Documents and OCR lists, by stage or by item_type (section 11): each its
    first LIST_LIMIT items and how many there are. An item listed by its type outside its type's
    stage is rare: those are read apart (``ix_ingestion_items_other``)."""
    lists = {}
    for stage, item_type in ITEM_TYPE_OF_STAGE.items():
        elsewhere = run.items.filter(item_type=item_type).exclude(TYPE_MATCHES_STAGE).exclude(stage=stage)
        first = [*run.items.filter(stage=stage).order_by("id")[:LIST_LIMIT], *elsewhere.order_by("id")[:LIST_LIMIT]]
        lists[stage] = {
            "label": STAGE_LABELS[stage],
            "items": sorted(first, key=lambda item: item.id)[:LIST_LIMIT],
            "total": counts.get(stage, {}).get("items", 0) + elsewhere.count(),
        }
    return lists


def run_problems(*, run: IngestionRun) -> QuerySet[IngestionItem]:
    """Items for the error panels: failed or waiting for review (``ix_ingestion_items_problems``)."""
    return run.items.filter(IS_PROBLEM).order_by("stage", "id")[:LIST_LIMIT]


def run_timeline(*, counts: dict[str, dict]) -> list[dict]:
    """Per stage: its items, when the first one appeared and when the last one moved."""
    return [counts[stage] for stage in ITEM_TYPE_OF_STAGE if stage in counts]


def run_jobs(*, run: IngestionRun) -> QuerySet:
    return jobs_with_args(values={"run_id": str(run.id)})


def run_jobs_summary(*, run: IngestionRun, limit: int = LIST_LIMIT) -> dict:
    """A run's jobs by status, each counted up to JOBS_COUNTED (an index range of the run's jobs
    of that status, cut off: a run of 100,000 items has as many jobs), and those that did not
    succeed (their first ``limit``). ``shown``: each count as the page says it ("1000+")."""
    by_status = job_counts_with_args(values={"run_id": str(run.id)}, at_most=JOBS_COUNTED)
    unsucceeded = jobs_with_args(values={"run_id": str(run.id)}, statuses=set(JobStatus) - {JobStatus.SUCCEEDED})
    more = any(counted > JOBS_COUNTED for counted in by_status.values())
    total = sum(min(counted, JOBS_COUNTED) for counted in by_status.values())
    return {
        "shown": {status: _at_most(counted) for status, counted in by_status.items()},
        "total": total,
        "total_shown": f"{total}+" if more else str(total),
        "unsucceeded": list(unsucceeded[:limit]),
    }


def _at_most(counted: int) -> str:
    return f"{JOBS_COUNTED}+" if counted > JOBS_COUNTED else str(counted)


def _jobs_of_outer_run(statuses=None) -> QuerySet:
    return jobs_with_args(values={"run_id": Cast(OuterRef("id"), TextField())}, statuses=statuses)


def runs_to_settle() -> QuerySet[IngestionRun]:
    """Pending and running runs whose jobs have all finished (they have some, none queued or
    running), with what settling them needs: ``failed_items``, ``first_failure`` (the first
    failed item's stage and error) and ``failed_job`` (the first job that did not succeed: its
    task and error)."""
    failed_items = IngestionItem.objects.filter(run_id=OuterRef("id"), status=ItemStatus.FAILED).order_by("id")
    text = TextField()
    first_failure = Concat(
        "stage",
        Value(": "),
        Coalesce("last_error_message", "error_message", Value("failed"), output_field=text),
        output_field=text,
    )
    unsucceeded_jobs = _jobs_of_outer_run().exclude(status=JobStatus.SUCCEEDED)
    failed_job = Concat(
        "task", Value(": "), Coalesce("error", Cast("status", text), output_field=text), output_field=text
    )
    return (
        IngestionRun.objects.filter(status__in=ACTIVE_RUN_STATUSES)
        .only("id", "status")
        .filter(Exists(_jobs_of_outer_run()))
        .exclude(Exists(_jobs_of_outer_run(statuses=LIVE)))
        .annotate(
            failed_items=Count("items", filter=Q(items__status=ItemStatus.FAILED)),
            first_failure=Subquery(failed_items.annotate(text=first_failure).values("text")[:1]),
            failed_job=Subquery(unsucceeded_jobs.annotate(text=failed_job).values("text")[:1]),
        )
    )


def run_stage_cards(*, counts: dict[str, dict]) -> list[dict]:
    """Each stage's card: its label, its items, and how many are in each status: the seed's
    (``STATS_SHAPE``, zero too) then any other with items (skipped OCR, pending, running, ...)."""
    cards = []
    for stage, statuses in STATS_SHAPE.items():
        counted = counts.get(stage, {"items": 0, "by_status": {}})
        others = [status for status in ItemStatus if status not in statuses and counted["by_status"].get(status)]
        cards.append(
            {
                "stage": stage,
                "label": STAGE_LABELS[stage],
                "total": counted["items"],
                "by_status": [(status, counted["by_status"].get(status, 0)) for status in (*statuses, *others)],
            }
        )
    return cards


def run_items_in(*, counts: dict[str, dict], statuses: Iterable[str]) -> int:
    """How many of the run's items (every stage) are in ``statuses``, from its counts."""
    return sum(stage["by_status"].get(status, 0) for stage in counts.values() for status in statuses)


def run_item_count(*, run_id: uuid.UUID, stage: str | None = None, status: str | None = None) -> int:
    """How many items of the run are in ``stage`` and ``status`` (None: any), from its counts."""
    counts = RunStageCount.objects.filter(run_id=run_id, **_given(stage=stage, status=status))
    return sum(counts.values_list("items", flat=True))
