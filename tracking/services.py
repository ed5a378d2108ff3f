"""State changes of pipeline_tracking rows.

Every change is one guarded statement (or one short transaction) on the ``pipeline``
database, so concurrent daemons cannot move a row through an illegal transition.
"""

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models.functions import Now

from pipeline_project.api.errors import ConflictError, NotFoundError
from pipeline_project.db import sql
from tracking.models import QUEUE_STAGES, STAGES, PipelineTracking, Stage, Status

DATABASE = "pipeline"


@dataclass(frozen=True)
class Transition:
    target: str
    sources: frozenset[str]


TRANSITIONS: dict[str, Transition] = {
    "start": Transition(Status.STARTED, frozenset({Status.NEW})),
    "done": Transition(Status.DONE, frozenset({Status.STARTED})),
    "fail": Transition(Status.FAILED, frozenset({Status.NEW, Status.STARTED})),
    "retry": Transition(Status.NEW, frozenset({Status.FAILED})),
}


@dataclass(frozen=True)
class Registration:
    filename: str
    shards: list[int]
    created: bool
    created_shards: list[int]


@dataclass(frozen=True)
class QueueItem:
    filename: str
    shard: int
    created_at: datetime


def file_register(*, filename: str, shards: list[int]) -> Registration:
    """Create one row per shard (event-ingest ``started``); rows that exist are left alone.

    ``ON CONFLICT DO NOTHING`` on the unique (filename, shard) key makes concurrent
    registrations of the same file create each row exactly once.
    """
    wanted = sorted(set(shards))
    rows = sql.rows(
        """
        INSERT INTO pipeline_tracking (filename, shard, event_ingest_status)
        SELECT %(filename)s, shard, 'started' FROM unnest(%(shards)s::integer[]) AS shard
        ON CONFLICT (filename, shard) DO NOTHING
        RETURNING shard
        """,
        {"filename": filename, "shards": wanted},
        using=DATABASE,
    )
    created = sorted(row[0] for row in rows)
    return Registration(filename=filename, shards=wanted, created=bool(created), created_shards=created)


def event_ingest_mark_done(*, filename: str) -> int:
    """Mark generation of a file finished on every shard; return how many rows changed."""
    with transaction.atomic(using=DATABASE):
        rows = PipelineTracking.objects.select_for_update().filter(filename=filename)
        statuses = dict(rows.values_list("shard", "event_ingest_status"))
        if not statuses:
            raise NotFoundError(f"File {filename!r} is not registered.", details={"filename": filename})
        illegal = {
            str(shard): status for shard, status in statuses.items() if status not in (Status.STARTED, Status.DONE)
        }
        if illegal:
            raise ConflictError(
                "event-ingest cannot move to done from the current status of some shards.",
                code="illegal_transition",
                details={
                    "filename": filename,
                    "stage": "event-ingest",
                    "transition": "done",
                    "current_status": illegal,
                },
            )
        return rows.filter(event_ingest_status=Status.STARTED).update(event_ingest_status=Status.DONE, updated_at=Now())


# Transitions that do a stage's work: the seed's readiness rules say a stage works on rows
# the previous stage finished.
NEEDS_PREVIOUS_DONE = frozenset({"start", "done"})


def stage_transition(*, stage: Stage, transition: str, filename: str, shard: int) -> str:
    """Apply start/done/fail/retry to one row; return the row's status afterwards.

    A row already in the target status is left as it is (an idempotent repeat). ``start`` and
    ``done`` need the previous stage ``done``; any other status outside the transition's
    sources is a conflict.
    """
    rule = TRANSITIONS[transition]
    row = PipelineTracking.objects.filter(filename=filename, shard=shard)
    ready = {stage.previous_column: Status.DONE} if transition in NEEDS_PREVIOUS_DONE else {}
    changed = row.filter(**{f"{stage.column}__in": rule.sources}, **ready).update(
        **{stage.column: rule.target, "updated_at": Now()}
    )
    if changed:
        return rule.target
    found = row.values(stage.column, stage.previous_column).first()
    if found is None:
        raise NotFoundError(
            f"No row for file {filename!r}, shard {shard}.", details={"filename": filename, "shard": shard}
        )
    current, previous = found[stage.column], found[stage.previous_column]
    if current == rule.target:
        return current
    details = {"filename": filename, "shard": shard, "stage": stage.slug, "transition": transition}
    if ready and previous != Status.DONE:
        previous_slug = next(other.slug for other in STAGES.values() if other.column == stage.previous_column)
        raise ConflictError(
            f"{stage.slug} cannot {transition}: the previous stage, {previous_slug}, is {previous!r}, not 'done'.",
            code="previous_stage_not_done",
            details={
                **details,
                "previous_stage": previous_slug,
                "previous_status": previous,
                "current_status": current,
            },
        )
    raise ConflictError(
        f"{stage.slug} cannot {transition} from {current!r}.",
        code="illegal_transition",
        details={**details, "current_status": current, "allowed_from": sorted(rule.sources)},
    )


def stage_retry_failed(*, stage: Stage, row_ids: list[int]) -> int:
    """Bulk retry (the admin action): only rows failed at this stage go back to new."""
    return PipelineTracking.objects.filter(pk__in=row_ids, **{stage.column: Status.FAILED}).update(
        **{stage.column: Status.NEW, "updated_at": Now()}
    )


def queue_claim(*, stage: Stage, limit: int) -> list[QueueItem]:
    """Atomically move up to ``limit`` ready rows of a stage to ``started`` and return them.

    ``FOR UPDATE SKIP LOCKED`` lets concurrent claimers pass over each other's rows, and
    the materialized CTE fixes the LIMIT before the UPDATE so no claim takes more.
    """
    assert stage.slug in QUEUE_STAGES
    claimed = sql.rows(
        f"""
        WITH ready AS MATERIALIZED (
            SELECT id FROM pipeline_tracking
            WHERE {stage.previous_column} = 'done' AND {stage.column} = 'new'
            ORDER BY created_at, id
            LIMIT %(limit)s
            FOR UPDATE SKIP LOCKED
        )
        UPDATE pipeline_tracking AS t
        SET {stage.column} = 'started', updated_at = now()
        FROM ready WHERE t.id = ready.id
        RETURNING t.filename, t.shard, t.created_at, t.id
        """,
        {"limit": limit},
        using=DATABASE,
    )
    rows = sorted(claimed, key=lambda row: (row[2], row[3]))
    return [QueueItem(filename=filename, shard=shard, created_at=created_at) for filename, shard, created_at, _ in rows]


def files_delete(*, filenames: list[str] | tuple[str, ...]) -> int:
    """Delete the rows of the files ``filenames`` (their stage history goes with them: ON DELETE
    CASCADE); how many rows were deleted."""
    deleted, _by_model = PipelineTracking.objects.using(DATABASE).filter(filename__in=filenames).delete()
    return deleted
