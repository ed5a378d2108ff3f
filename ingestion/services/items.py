"""Items of ingestion runs (seed 004), upserted by ``(run_id, item_key)`` with the seed's SQL
template (section 7): every coalesce rule as written, ``ingest_status = status``,
``first_seen_at`` kept, ``last_seen_at`` and ``updated_at`` moved. One statement serves one item
or many; the triggers of ``ingestion_items`` keep each run's ``stats_json`` current from the rows
it changed. The runs are locked first (in id order), so a cancel either waits for the write or
is seen by it: nothing is written to a canceled run.
"""

import functools
import json
import uuid
from typing import Any

from ingestion import keys
from ingestion.models import ItemStage, ItemStatus, ItemType, RunStatus
from ingestion.services.runs import RunCanceled
from pipeline_project.api.errors import InvalidInputError, NotFoundError
from pipeline_project.db import sql
from pipeline_project.db.storable import json_problem, text_problem

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

_RECORD_COLUMNS = ", ".join(f"{name} {_COLUMN_TYPES.get(name, 'text')}" for name in ITEM_FIELDS)
# The template for a batch, in one statement (so the runs' locks are held for it alone, not over
# round trips to the client): the items' runs are locked (in id order), and the batch is written
# only if every item's run exists, belongs to its source and was not canceled (``_check_runs``
# says which rule refused it). Its VALUES row becomes a SELECT over the batch's items.
_UPSERT = f"""
WITH runs AS (
    SELECT id, source_id, status FROM ingestion_runs WHERE id = ANY(%(runs)s::uuid[]) ORDER BY id FOR NO KEY UPDATE
),
refused AS (
    SELECT FROM jsonb_to_recordset(%(item_runs)s::jsonb) AS i(run_id uuid, source_id bigint)
    LEFT JOIN runs ON runs.id = i.run_id
    WHERE runs.id IS NULL OR runs.source_id <> i.source_id OR runs.status = '{RunStatus.CANCELED}'
),
written AS (
    INSERT INTO ingestion_items ({COLUMNS})
    SELECT
        x.run_id, x.source_id, x.source_url_id, x.document_id, x.item_key, x.item_label, x.stage, x.item_type,
        x.status, x.status, x.ingest_reason, x.job_id, x.document_url, x.filename, x.file_checksum, x.file_kind,
        x.error_message, x.last_error_message, x.needs_review, x.review_reason, coalesce(x.context_json, '{{}}'::jsonb),
        x.payload_json, now(), now(), now(), now()
    FROM jsonb_to_recordset(%(items)s::jsonb) AS x({_RECORD_COLUMNS})
    WHERE NOT EXISTS (SELECT FROM refused)
    {ON_CONFLICT}
    RETURNING id, item_key, xmax = 0 AS created
)
SELECT (SELECT json_agg(json_build_array(id, source_id, status)) FROM runs),
       (SELECT json_agg(json_build_array(id, item_key, created)) FROM written)
"""


# --- items -----------------------------------------------------------------------------------


def items_upsert(*, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Create or update items (each by ``(run_id, item_key)``; the key is derived by the rules of
    section 5.4 when not given). Items with the same key in one call apply in order, as if sent
    one after another. Returns ``{id, item_key, created}`` per distinct item."""
    if not 1 <= len(items) <= MAX_ITEMS_PER_CALL:
        raise InvalidInputError(f"send 1 to {MAX_ITEMS_PER_CALL} items")
    checked = [_checked_item(item, index) for index, item in enumerate(items)]
    merged: dict[tuple, dict] = {}
    for item in checked:
        key = (item["run_id"], item["item_key"])
        merged[key] = _merged(merged[key], item) if key in merged else item
    # In key order: concurrent calls with overlapping items lock them in the same order.
    rows = sorted(merged.values(), key=lambda item: (item["run_id"], item["item_key"]))
    named = {(item["run_id"], item["source_id"]) for item in checked}  # each run and source, once
    [(runs, written)] = sql.rows(
        _UPSERT,
        {
            "runs": sorted({run_id for run_id, _source_id in named}),
            "item_runs": json.dumps([{"run_id": run_id, "source_id": source_id} for run_id, source_id in named]),
            "items": json.dumps(rows),
        },
    )
    _check_runs(checked, sql.json_value(runs) or [])
    return [{"id": item_id, "item_key": key, "created": created} for item_id, key, created in sql.json_value(written)]


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


def _check_runs(items: list[dict], found: list[list]) -> None:
    """Refuse the batch (the statement wrote nothing) at its first item whose run was not found,
    belongs to another source or was canceled: the runs were locked to the write, so a cancel
    either waited for it or came first and is seen."""
    runs = {run_id: (source_id, status) for run_id, source_id, status in found}
    for item in items:
        source_id, status = runs.get(item["run_id"], (None, None))
        if source_id is None:
            raise NotFoundError(f"run {item['run_id']} not found", code="run_not_found")
        if source_id != item["source_id"]:
            raise InvalidInputError(
                f"item {item['item_key']} names source {item['source_id']}, its run belongs to source {source_id}"
            )
        if status == RunStatus.CANCELED:
            raise RunCanceled(item["run_id"])
