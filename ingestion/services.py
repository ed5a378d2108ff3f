"""State changes of ingestion runs and items (seed 004).

Items are upserted by ``(run_id, item_key)`` with the seed's SQL template (section 7): every
coalesce rule as written, ``ingest_status = status``, ``first_seen_at`` kept, ``last_seen_at``
and ``updated_at`` moved. One statement serves one item or many; the triggers of
``ingestion_items`` keep each run's ``stats_json`` current from the rows it changed.
"""

import functools
import json
import uuid
from typing import Any

from django.db import transaction
from django.utils import timezone

from ingestion import keys
from ingestion.models import (
    ENDED_RUN_STATUSES,
    IngestionRun,
    ItemStage,
    ItemStatus,
    ItemType,
    RunStage,
    RunStatus,
    Source,
)
from ingestion.stats import empty_stats
from jobs.services._db import _rows
from pipeline_project.core.errors import ConflictError, InvalidInputError, NotFoundError
from pipeline_project.core.storable import json_problem, text_problem

# Columns a client gives, and how a later write of an item treats an earlier value (section 7):
# replaced, or replaced only by a value (coalesce). context_json is always replaced ({} if none).
REPLACED = ("source_id", "stage", "item_type", "status", "context_json")
COALESCED = (
    "source_url_id",
    "document_id",
    "item_label",
    "ingest_reason",
    "job_id",
    "document_url",
    "filename",
    "file_checksum",
    "file_kind",
    "error_message",
    "last_error_message",
    "needs_review",
    "review_reason",
    "payload_json",
)
ITEM_FIELDS = ("run_id", "item_key", *REPLACED, *COALESCED)
_COLUMN_TYPES = {
    "run_id": "uuid",
    "source_id": "bigint",
    "job_id": "uuid",
    "needs_review": "boolean",
    "context_json": "jsonb",
    "payload_json": "jsonb",
}
_ENUMS = {"stage": ItemStage.values, "item_type": ItemType.values, "status": ItemStatus.values}
TEXT_FIELDS = frozenset(ITEM_FIELDS) - set(_COLUMN_TYPES)
MAX_ITEMS_PER_CALL = 5000
MAX_KEY_BYTES = 512  # item_key is in a unique index
MAX_TEXT_BYTES = 64 * 1024


# The seed's template (section 7): its columns, and its conflict rule as written.
ON_CONFLICT = """
ON CONFLICT (run_id, item_key) DO UPDATE SET
    source_id = excluded.source_id,
    source_url_id = coalesce(excluded.source_url_id, ingestion_items.source_url_id),
    document_id = coalesce(excluded.document_id, ingestion_items.document_id),
    item_label = coalesce(excluded.item_label, ingestion_items.item_label),
    stage = excluded.stage,
    item_type = excluded.item_type,
    status = excluded.status,
    ingest_status = excluded.status,
    ingest_reason = coalesce(excluded.ingest_reason, ingestion_items.ingest_reason),
    job_id = coalesce(excluded.job_id, ingestion_items.job_id),
    document_url = coalesce(excluded.document_url, ingestion_items.document_url),
    filename = coalesce(excluded.filename, ingestion_items.filename),
    file_checksum = coalesce(excluded.file_checksum, ingestion_items.file_checksum),
    file_kind = coalesce(excluded.file_kind, ingestion_items.file_kind),
    error_message = coalesce(excluded.error_message, ingestion_items.error_message),
    last_error_message = coalesce(excluded.last_error_message, ingestion_items.last_error_message),
    needs_review = coalesce(excluded.needs_review, ingestion_items.needs_review),
    review_reason = coalesce(excluded.review_reason, ingestion_items.review_reason),
    context_json = coalesce(excluded.context_json, ingestion_items.context_json),
    payload_json = coalesce(excluded.payload_json, ingestion_items.payload_json),
    last_seen_at = now(),
    updated_at = now()
"""

COLUMNS = """
    run_id, source_id, source_url_id, document_id, item_key, item_label, stage, item_type, status,
    ingest_status, ingest_reason, job_id, document_url, filename, file_checksum, file_kind,
    error_message, last_error_message, needs_review, review_reason, context_json, payload_json,
    first_seen_at, last_seen_at, created_at, updated_at
"""

# The template for a batch: its VALUES row becomes a SELECT over the batch's items.
_UPSERT = f"""
INSERT INTO ingestion_items ({COLUMNS})
SELECT
    x.run_id, x.source_id, x.source_url_id, x.document_id, x.item_key, x.item_label, x.stage, x.item_type, x.status,
    x.status, x.ingest_reason, x.job_id, x.document_url, x.filename, x.file_checksum, x.file_kind,
    x.error_message, x.last_error_message, x.needs_review, x.review_reason, coalesce(x.context_json, '{{}}'::jsonb),
    x.payload_json, now(), now(), now(), now()
FROM jsonb_to_recordset(%s::jsonb) AS x({", ".join(f"{name} {_COLUMN_TYPES.get(name, 'text')}" for name in ITEM_FIELDS)})
{ON_CONFLICT}
RETURNING id, item_key, xmax = 0
"""


# --- items -----------------------------------------------------------------------------------


def items_upsert(*, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create or update items (each by ``(run_id, item_key)``; the key is derived by the rules of
    section 5.4 when not given). Items with the same key in one call apply in order, as if sent
    one after another. Returns ``{id, item_key, created}`` per distinct item."""
    if not 1 <= len(items) <= MAX_ITEMS_PER_CALL:
        raise InvalidInputError(f"send 1 to {MAX_ITEMS_PER_CALL} items")
    checked = [_checked_item(item, index) for index, item in enumerate(items)]
    _check_runs(checked)
    merged: dict[tuple, dict] = {}
    for item in checked:
        key = (item["run_id"], item["item_key"])
        merged[key] = _merged(merged[key], item) if key in merged else item
    # In key order: concurrent calls with overlapping items lock them in the same order.
    rows = sorted(merged.values(), key=lambda item: (item["run_id"], item["item_key"]))
    result = _rows(_UPSERT, [json.dumps(rows)])
    return [{"id": item_id, "item_key": key, "created": created} for item_id, key, created in result]


def _text_field_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return "must be text"
    if problem := text_problem(value):  # NUL, lone surrogates
        return problem
    if len(value) > MAX_TEXT_BYTES // 4 and len(value.encode()) > MAX_TEXT_BYTES:  # encoded only if it may be long
        return f"must be at most {MAX_TEXT_BYTES} bytes in UTF-8"
    return None


def _merged(earlier: dict, later: dict) -> dict:
    """Two writes of one item in one call, folded as the template would apply them in turn."""
    merged = dict(later)
    for name in COALESCED:
        if later.get(name) is None:
            merged[name] = earlier.get(name)
    return merged


def _checked_item(item: Any, index: int) -> dict:
    """One item's fields, checked against the seed's rules (400 naming the item and field)."""

    def problem(field: str, message: str) -> InvalidInputError:
        return InvalidInputError(f"items[{index}].{field}: {message}", details={f"items[{index}].{field}": [message]})

    if not isinstance(item, dict):
        raise InvalidInputError(f"items[{index}] must be an object")
    unknown = set(item) - set(ITEM_FIELDS)
    if unknown:
        raise problem(sorted(unknown)[0], "unknown field")
    checked = {name: item.get(name) for name in ITEM_FIELDS}
    for name, allowed in _ENUMS.items():
        if not isinstance(checked[name], str) or checked[name] not in allowed:
            raise problem(name, f"must be one of {', '.join(allowed)}")
    for name in ("run_id", "source_id"):
        if checked[name] is None:
            raise problem(name, "is required")
    for name in ("run_id", "job_id"):
        if checked[name] is not None:
            try:
                checked[name] = _uuid_text(str(checked[name]))
            except ValueError:
                raise problem(name, "must be a UUID") from None
    source_id = checked["source_id"]
    if isinstance(source_id, bool) or not isinstance(source_id, int) or not 1 <= source_id < 2**63:
        raise problem("source_id", "must be a positive integer")
    for name in ("source_url_id", "document_id"):  # ids may come as numbers
        if isinstance(checked[name], int) and not isinstance(checked[name], bool):
            checked[name] = str(checked[name])
    if checked["needs_review"] is not None and not isinstance(checked["needs_review"], bool):
        raise problem("needs_review", "must be true, false or null")
    for name in ("context_json", "payload_json"):
        if (why := json_problem(checked[name])) is not None:
            raise problem(name, f"cannot be stored: it {why}")
    for name, value in item.items():  # only the fields given (most are not)
        if value is not None and name in TEXT_FIELDS and (why := _text_field_problem(checked[name])):
            raise problem(name, why)
    if checked["item_key"] is None:
        try:
            checked["item_key"] = keys.item_key(
                item_type=checked["item_type"],
                source_url_id=checked["source_url_id"],
                document_id=checked["document_id"],
                url=checked["document_url"],
            )
        except ValueError as exc:
            raise problem("item_key", str(exc)) from None
    elif not checked["item_key"] or len(checked["item_key"].encode()) > MAX_KEY_BYTES:
        raise problem("item_key", f"must be 1 to {MAX_KEY_BYTES} bytes")
    return checked


@functools.lru_cache(maxsize=1024)  # a batch names a few runs many times
def _uuid_text(value: str) -> str:
    return str(uuid.UUID(value))


def _check_runs(items: list[dict]) -> None:
    """Every item's run exists and belongs to the item's source."""
    wanted = {item["run_id"] for item in items}
    found = IngestionRun.objects.filter(id__in=wanted).values_list("id", "source_id")
    sources = {str(run_id): source_id for run_id, source_id in found}
    for item in items:
        source_id = sources.get(item["run_id"])
        if source_id is None:
            raise NotFoundError(f"run {item['run_id']} not found", code="run_not_found")
        if source_id != item["source_id"]:
            raise InvalidInputError(
                f"item {item['item_key']} names source {item['source_id']}, its run belongs to source {source_id}"
            )


# --- runs ------------------------------------------------------------------------------------

# What a run's status may become (section 4.3); a failed run runs again when its failed items are retried.
RUN_TRANSITIONS = {
    RunStatus.PENDING: {RunStatus.RUNNING, RunStatus.FAILED, RunStatus.CANCELED},
    RunStatus.RUNNING: {RunStatus.RUNNING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELED},
    RunStatus.FAILED: {RunStatus.RUNNING},
    RunStatus.COMPLETED: set(),
    RunStatus.CANCELED: set(),
}
STAGE_OF_TASK = {"discover": RunStage.DISCOVERY, "download": RunStage.DOCUMENTS, "ocr": RunStage.OCR}
MAX_ERROR_MESSAGE_CHARS = 1000


def run_create(*, source_id: int, manual: bool = False) -> IngestionRun:
    source = Source.objects.filter(id=source_id).first()
    if source is None:
        raise NotFoundError(f"source {source_id} not found", code="source_not_found")
    return IngestionRun.objects.create(source=source, manual=manual, stats_json=empty_stats())


def run_update(
    *,
    run_id: uuid.UUID,
    status: str | None = None,
    active_stage: str | None = None,
    error_message: str | None = None,
    stats_json: dict | None = None,
    finished_at=None,
) -> IngestionRun:
    """The seed's run-level update (section 9), within the lifecycle of section 4.3: a run that
    starts running gets ``started_at``; one that ends gets ``finished_at`` (now, unless given)
    and, on completion, ``active_stage = summary``."""
    with transaction.atomic():
        run = IngestionRun.objects.select_for_update().filter(id=run_id).first()
        if run is None:
            raise NotFoundError(f"run {run_id} not found", code="run_not_found")
        if status is not None:
            if status not in RUN_TRANSITIONS.get(run.status, ()):
                raise ConflictError(f"a {run.status} run cannot become {status}", code="invalid_transition")
            _set_status(run, status)
        if active_stage is not None:
            run.active_stage = active_stage
        if error_message is not None:
            run.error_message = error_message[:MAX_ERROR_MESSAGE_CHARS]
        if stats_json is not None:
            if why := json_problem(stats_json):
                raise InvalidInputError(f"stats_json cannot be stored: it {why}")
            run.stats_json = stats_json
        if finished_at is not None:
            run.finished_at = finished_at
        run.save()
    return run


def _set_status(run: IngestionRun, status: str) -> None:
    now = timezone.now()
    if status == RunStatus.RUNNING:
        run.started_at = run.started_at or now
        run.finished_at = None
    if status in ENDED_RUN_STATUSES:
        run.finished_at = now
    if status == RunStatus.COMPLETED:
        run.active_stage = RunStage.SUMMARY
    run.status = status


def run_job_claimed(*, run_id: uuid.UUID, task: str) -> None:
    """A job of the run was claimed: a pending run starts running, and its active stage moves on
    to the job's (discover → discovery, download → documents, ocr → ocr), never back."""
    stage = STAGE_OF_TASK[task]
    order = list(STAGE_OF_TASK.values())
    _rows(
        """
        UPDATE ingestion_runs SET
            status = 'running',
            started_at = coalesce(started_at, now()),
            active_stage = CASE WHEN array_position(%(order)s::text[], active_stage) >= %(rank)s
                                THEN active_stage ELSE %(stage)s END,
            updated_at = now()
        WHERE id = %(run)s AND status IN ('pending', 'running')
        RETURNING id
        """,
        {"order": [str(s) for s in order], "rank": order.index(stage) + 1, "stage": str(stage), "run": str(run_id)},
    )
