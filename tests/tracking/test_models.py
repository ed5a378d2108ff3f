"""The tracking table's statement triggers: ready-for-stage NOTIFY (observed from a second
connection) and the stage history."""

import pytest

from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening
from tracking import services
from tracking.models import QUEUE_STAGES, READY_CHANNEL, PipelineTracking, StageChange

pytestmark = ALL_DATABASES_COMMITTED


@pytest.fixture
def listener():
    with listening("pipeline", READY_CHANNEL) as received:
        yield received


def test_event_ingest_done_notifies_shard_splitter_once_per_statement(listener):
    services.file_register(filename="f", shards=range(20))
    assert listener() == []  # registered rows are not ready for anything

    services.event_ingest_mark_done(filename="f")

    assert listener() == ["shard-splitter"]


def test_stage_done_notifies_the_next_stage(listener):
    services.file_register(filename="f", shards=[0])
    services.event_ingest_mark_done(filename="f")
    listener()
    splitter, worker = QUEUE_STAGES["shard-splitter"], QUEUE_STAGES["shard-worker"]

    services.stage_transition(stage=splitter, transition="start", filename="f", shard=0)
    assert listener() == []
    services.stage_transition(stage=splitter, transition="done", filename="f", shard=0)
    assert listener() == ["shard-worker"]

    services.stage_transition(stage=worker, transition="fail", filename="f", shard=0)
    assert listener() == []
    services.stage_transition(stage=worker, transition="retry", filename="f", shard=0)
    assert listener() == ["shard-worker"]


def test_updates_that_keep_rows_ready_do_not_notify(listener):
    services.file_register(filename="f", shards=[0])
    services.event_ingest_mark_done(filename="f")
    listener()

    PipelineTracking.objects.filter(filename="f").update(filename="g")  # still ready, not newly

    assert listener() == []


def test_inserting_ready_rows_notifies(listener):
    PipelineTracking.objects.bulk_create(
        [PipelineTracking(filename="bulk", shard=shard, event_ingest_status="done") for shard in range(5)]
    )

    assert listener() == ["shard-splitter"]


def history(filename: str, shard: int) -> list[tuple[str, str]]:
    return list(
        StageChange.objects.filter(row__filename=filename, row__shard=shard)
        .order_by("id")
        .values_list("stage", "status")
    )


def test_every_status_a_statement_sets_is_recorded_in_order():
    services.file_register(filename="f", shards=[0, 1])
    services.event_ingest_mark_done(filename="f")
    splitter = QUEUE_STAGES["shard-splitter"]
    services.queue_claim(stage=splitter, limit=1)  # shard 0 started
    services.stage_transition(stage=splitter, transition="fail", filename="f", shard=0)
    services.stage_transition(stage=splitter, transition="retry", filename="f", shard=0)

    assert history("f", 0) == [  # registered with event-ingest started: the row's created_at
        ("event-ingest", "done"),
        ("shard-splitter", "started"),
        ("shard-splitter", "failed"),
        ("shard-splitter", "new"),
    ]
    assert history("f", 1) == [("event-ingest", "done")]
    assert all(change.changed_at for change in StageChange.objects.all())
