"""Items upserted by the seed's template, and runs through their lifecycle, on PostgreSQL."""

import re
import threading
import time
import uuid

import pytest
from django.db import DatabaseError, transaction

from ingestion import services
from ingestion.models import IngestionItem, IngestionRun
from jobs.queue.models import Job
from jobs.queue.services import JobSpec
from pipeline_project.api.errors import ConflictError, InvalidInputError, NotFoundError
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import run_in_threads
from tests.ingestion.helpers import item, new_run

pytestmark = ALL_DATABASES


def stored(run, key="source_url:1") -> IngestionItem:
    return IngestionItem.objects.get(run=run, item_key=key)


def test_a_new_item_gets_its_key_ingest_status_and_times():
    run = new_run()
    [result] = services.items_upsert(items=[item(run, item_label="Home")])

    row = stored(run)
    assert result == {"id": row.id, "item_key": "source_url:1", "created": True}
    assert row.ingest_status == "completed" and row.context_json == {} and row.item_label == "Home"
    assert row.first_seen_at == row.last_seen_at == row.created_at == row.updated_at


@ALL_DATABASES_COMMITTED  # now() moves between the two writes
def test_a_retry_updates_the_item_and_never_adds_a_row():
    run = new_run()
    services.items_upsert(items=[item(run, status="running")])
    first = stored(run)
    [result] = services.items_upsert(items=[item(run, status="completed")])

    assert IngestionItem.objects.filter(run=run).count() == 1
    again = stored(run)
    assert result["created"] is False and again.id == first.id
    assert (again.status, again.ingest_status) == ("completed", "completed")
    assert again.first_seen_at == first.first_seen_at and again.created_at == first.created_at
    assert again.last_seen_at > first.last_seen_at and again.updated_at > first.updated_at


# A first and a second value of each column the template coalesces.
COALESCED_VALUES = {
    "document_id": ("d-1", "d-2"),
    "item_label": ("label", "other"),
    "ingest_reason": ("new", "changed"),
    "job_id": (uuid.UUID(int=1), uuid.UUID(int=2)),
    "document_url": ("http://a.example/x.pdf", "http://a.example/y.pdf"),
    "filename": ("x.pdf", "y.pdf"),
    "file_checksum": ("abc", "def"),
    "file_kind": ("pdf", "png"),
    "error_message": ("first", "second"),
    "last_error_message": ("last", "later"),
    "needs_review": (True, False),
    "review_reason": ("short text", "no letters"),
    "payload_json": ({"pages": 2}, {"pages": 3}),
}


@pytest.mark.parametrize("field", sorted(COALESCED_VALUES))
def test_a_coalesced_column_keeps_its_value_when_a_later_write_leaves_it_out_and_takes_a_new_one(field):
    first, second = COALESCED_VALUES[field]
    as_sent = str if field == "job_id" else (lambda value: value)
    run = new_run()
    services.items_upsert(items=[item(run, **{field: as_sent(first)})])
    services.items_upsert(items=[item(run)])
    kept = getattr(stored(run), field)
    services.items_upsert(items=[item(run, **{field: as_sent(second)})])

    assert (kept, getattr(stored(run), field)) == (first, second)


def test_a_job_id_that_is_not_a_uuid_is_refused():
    run = new_run()
    with pytest.raises(InvalidInputError, match=r"items\[0\]\.job_id"):
        services.items_upsert(items=[item(run, job_id="other")])


def test_source_url_id_is_coalesced_and_replaced_columns_are_replaced():
    run = new_run()
    services.items_upsert(items=[item(run, item_key="k", context_json={"a": 1})])
    services.items_upsert(
        items=[item(run, item_key="k", source_url_id=None, stage="documents", item_type="document", status="failed")]
    )

    row = stored(run, "k")
    assert row.source_url_id == "1"  # coalesced
    assert (row.stage, row.item_type, row.status, row.ingest_status) == ("documents", "document", "failed", "failed")
    assert row.context_json == {}  # the template writes coalesce(:context_json, '{}'): replaced


def test_the_same_key_twice_in_one_call_applies_in_order():
    run = new_run()
    result = services.items_upsert(
        items=[
            item(run, status="running", filename="a.pdf", error_message="boom"),
            item(run, status="completed", filename=None, item_label="done"),
        ]
    )

    row = stored(run)
    assert len(result) == 1 and IngestionItem.objects.filter(run=run).count() == 1
    assert (row.status, row.filename, row.error_message, row.item_label) == ("completed", "a.pdf", "boom", "done")


def test_keys_are_derived_when_not_given():
    run = new_run()
    services.items_upsert(
        items=[
            item(run, stage="documents", item_type="document", document_id=9),
            item(run, stage="ocr", item_type="ocr_job", source_url_id=None, document_url="http://A.example/f.pdf"),
        ]
    )
    keys = set(IngestionItem.objects.filter(run=run).values_list("item_key", flat=True))
    assert "document:9" in keys and any(key.startswith("ocr_job_url:") for key in keys)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stage": "summary"}, r"items\[0\]\.stage"),
        ({"item_type": "page"}, r"items\[0\]\.item_type"),
        ({"status": "done"}, r"items\[0\]\.status"),
        ({"source_id": "1"}, r"items\[0\]\.source_id"),
        ({"item_key": "k" * 513}, r"items\[0\]\.item_key"),
        ({"item_label": "a\x00b"}, r"items\[0\]\.item_label"),
        ({"item_label": "a\ud800b"}, r"items\[0\]\.item_label: contains a lone surrogate"),
        ({"item_key": "k\ud800"}, r"items\[0\]\.item_key"),
        ({"document_url": 7}, r"items\[0\]\.document_url: must be text"),
        ({"payload_json": {"x": float("nan")}}, r"items\[0\]\.payload_json"),
        ({"needs_review": "yes"}, r"items\[0\]\.needs_review"),
        ({"colour": "red"}, r"items\[0\]\.colour"),
        ({"source_url_id": None}, r"items\[0\]\.item_key"),
    ],
)
def test_bad_items_are_refused_and_nothing_is_written(fields, message):
    run = new_run()
    good = item(run, item_key="good")
    with pytest.raises(InvalidInputError, match=message):
        services.items_upsert(items=[{**item(run), **fields}, good])
    assert not IngestionItem.objects.filter(run=run).exists()


def test_an_unknown_run_or_a_run_of_another_source_refuses_the_batch_and_nothing_is_written():
    run, other = new_run("one"), new_run("two")
    good = item(run, item_key="good")
    with pytest.raises(NotFoundError):
        services.items_upsert(items=[good, item(run, run_id=str(uuid.uuid4()))])
    with pytest.raises(InvalidInputError, match="belongs to source"):
        services.items_upsert(items=[good, item(run, source_id=other.source_id)])
    # An earlier write of an item naming another source, though the later one (which wins) is right.
    with pytest.raises(InvalidInputError, match="belongs to source"):
        services.items_upsert(items=[item(run, item_key="k", source_id=other.source_id), item(run, item_key="k"), good])
    assert not IngestionItem.objects.filter(run__in=[run, other]).exists()


def test_stats_follow_the_items_in_the_seeds_shape():
    run = new_run()
    services.items_upsert(
        items=[
            item(run, item_key="u1"),
            item(run, item_key="u2", status="failed"),
            item(run, item_key="d1", stage="documents", item_type="document", status="skipped"),
            item(run, item_key="o1", stage="ocr", item_type="ocr_job", status="review_required"),
        ]
    )
    services.items_upsert(items=[item(run, item_key="u2", status="completed")])

    stats = IngestionRun.objects.get(id=run.id).stats_json
    assert stats.pop("updated_at").endswith("Z")
    assert stats == {
        "discovery": {"total": 2, "completed": 2, "failed": 0},
        "documents": {"total": 1, "completed": 0, "failed": 0, "skipped": 1},
        "ocr": {"total": 1, "completed": 0, "failed": 0, "review_required": 1},
    }
    IngestionItem.objects.filter(run=run, item_key="u1").delete()
    assert IngestionRun.objects.get(id=run.id).stats_json["discovery"]["total"] == 1


def test_a_run_goes_running_on_its_first_claimed_job_and_its_stage_only_moves_on():
    run = new_run()
    services.run_job_claimed(run_id=run.id, task="download")
    services.run_job_claimed(run_id=run.id, task="discover")

    run.refresh_from_db()
    assert (run.status, run.active_stage) == ("running", "documents") and run.started_at is not None


def test_run_lifecycle_through_updates():
    run = new_run()
    services.run_update(run_id=run.id, status="running")
    completed = services.run_update(run_id=run.id, status="completed")
    assert (completed.active_stage, completed.finished_at is not None) == ("summary", True)
    with pytest.raises(ConflictError):
        services.run_update(run_id=run.id, status="running")

    failed = new_run()
    services.run_update(run_id=failed.id, status="failed", error_message="x" * 5000)
    failed.refresh_from_db()
    assert failed.status == "failed" and len(failed.error_message) == services.MAX_ERROR_MESSAGE_CHARS


def test_stats_json_that_cannot_be_stored_is_refused():
    run = new_run()
    nested: list = []
    for _ in range(100):
        nested = [nested]
    with pytest.raises(InvalidInputError, match="stats_json cannot be stored"):
        services.run_update(run_id=run.id, stats_json={"deep": nested})
    assert IngestionRun.objects.get(id=run.id).stats_json["discovery"]["total"] == 0


def test_a_run_without_items_has_the_seeds_stats_shape_with_its_updated_at():
    run = new_run()
    stats = IngestionRun.objects.get(id=run.id).stats_json
    assert set(stats) == {"discovery", "documents", "ocr", "updated_at"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", stats["updated_at"])
    created_by_orm = IngestionRun.objects.create(source_id=run.source_id)  # whoever creates it
    assert IngestionRun.objects.get(id=created_by_orm.id).stats_json["documents"]["skipped"] == 0


@ALL_DATABASES_COMMITTED  # now() moves between transactions
@pytest.mark.parametrize(
    "write",
    [
        lambda run: services.run_update(run_id=run.id, active_stage="ocr"),
        lambda run: services.run_update(run_id=run.id, status="running"),
        lambda run: services.run_job_claimed(run_id=run.id, task="download"),
        lambda run: services.run_cancel(run_id=run.id, by="test"),
        lambda run: services.items_upsert(items=[item(run)]),
        lambda run: IngestionRun.objects.filter(id=run.id).update(error_message="by hand"),  # any other writer
    ],
    ids=["update", "status", "claimed", "cancel", "item", "orm"],
)
def test_every_write_of_a_run_moves_its_updated_at(write):
    run = new_run()
    before = IngestionRun.objects.get(id=run.id).updated_at
    write(run)
    assert IngestionRun.objects.get(id=run.id).updated_at > before


def canceled_run_with_items():
    run = new_run()
    services.items_upsert(items=[item(run, item_key="done"), item(run, item_key="busy", status="running")])
    services.run_cancel(run_id=run.id, by="test")
    return run


def test_nothing_is_written_to_a_canceled_run_and_its_items_stay_canceled():
    run = canceled_run_with_items()
    assert dict(IngestionItem.objects.filter(run=run).values_list("item_key", "status")) == {
        "done": "completed",
        "busy": "canceled",
    }
    with pytest.raises(services.RunCanceled) as refused:
        services.items_upsert(items=[item(run, item_key="busy"), item(run, item_key="new")])
    assert refused.value.status == 409 and refused.value.code == "run_canceled"
    assert IngestionItem.objects.get(run=run, item_key="busy").status == "canceled"
    assert not IngestionItem.objects.filter(run=run, item_key="new").exists()


@pytest.mark.parametrize(
    "write",
    [
        lambda run: IngestionItem.objects.filter(run=run, item_key="busy").update(status="completed"),
        lambda run: IngestionItem.objects.filter(run=run, item_key="done").update(status="running"),
        lambda run: IngestionItem.objects.create(
            run=run, source_id=run.source_id, item_key="late", stage="ocr", item_type="ocr_job", status="running"
        ),
    ],
    ids=["revive", "restart", "insert"],
)
def test_the_database_refuses_a_live_item_in_a_canceled_run_whoever_writes_it(write):
    run = canceled_run_with_items()
    with pytest.raises(DatabaseError, match="was canceled"), transaction.atomic():
        write(run)
    assert IngestionItem.objects.get(run=run, item_key="busy").status == "canceled"


def test_no_job_is_enqueued_for_a_canceled_run():
    run = canceled_run_with_items()
    spec = JobSpec(queue="default", task="download", lock_key="k", args={"run_id": str(run.id)})
    with pytest.raises(services.RunCanceled):
        services.run_jobs_enqueue(run_id=str(run.id), specs=[spec])
    with pytest.raises(services.RunCanceled):
        services.run_job_claimed(run_id=run.id, task="download")
    assert not Job.objects.exists()


@ALL_DATABASES_COMMITTED
def test_a_write_racing_a_cancel_waits_for_it_and_writes_nothing():
    run = new_run()
    canceling = threading.Event()

    def cancel():
        with transaction.atomic():
            services.run_cancel(run_id=run.id, by="test")
            canceling.set()
            time.sleep(0.5)  # the write comes now, and must wait for this commit

    def write():
        canceling.wait(5)
        started = time.monotonic()
        with pytest.raises(services.RunCanceled):
            services.items_upsert(items=[item(run, item_key="late", status="running")])
        return time.monotonic() - started

    waited = run_in_threads(2, lambda index: (cancel, write)[index]())[1]
    assert waited >= 0.3
    assert not IngestionItem.objects.filter(run=run).exists()
