"""Queue reads are served by the stage's partial index, in order, without a sort."""

import pytest
from django.db import connections

from tests.conftest import ALL_DATABASES
from tracking import selectors
from tracking.models import QUEUE_STAGES, PipelineTracking

pytestmark = ALL_DATABASES


def _plan(queryset) -> str:
    with connections["pipeline"].cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        sql, params = queryset.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


@pytest.mark.parametrize("stage", list(QUEUE_STAGES.values()), ids=list(QUEUE_STAGES))
@pytest.mark.parametrize("with_since", [False, True])
def test_queue_query_uses_the_stage_partial_index(stage, with_since):
    rows = PipelineTracking.objects.filter(**stage.ready_filter)
    if with_since:
        rows = rows.filter(updated_at__gte="2025-01-01T00:00:00Z")
    plan = _plan(rows.order_by("created_at", "id").values("filename", "shard", "created_at")[100:200])

    assert f"ix_trk_ready_{stage.key}" in plan
    assert "Sort" not in plan


def test_claim_query_uses_the_stage_partial_index():
    with connections["pipeline"].cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT id FROM pipeline_tracking WHERE shard_worker_status = 'done' AND mysql_sender_status = 'new' "
            "ORDER BY created_at, id LIMIT 10 FOR UPDATE SKIP LOCKED"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())

    assert "ix_trk_ready_mysql_sender" in plan and "Sort" not in plan


def test_file_statuses_is_404_for_unknown_file():
    from pipeline_project.api.errors import NotFoundError

    with pytest.raises(NotFoundError):
        selectors.file_statuses(filename="nope")


def test_a_shard_is_as_bad_as_its_worst_row_and_the_worst_shards_come_first():
    def row(filename, shard, worker, sender="new"):
        PipelineTracking.objects.create(
            filename=filename,
            shard=shard,
            event_ingest_status="done",
            shard_splitter_status="done",
            shard_worker_status=worker,
            mysql_sender_status=sender,
        )

    row("a", 0, "done", "done")
    row("b", 0, "failed")  # shard 0 of another file: shard 0 has failed at shard-worker
    row("a", 1, "started")
    row("a", 2, "done", "done")
    row("a", 3, "failed")
    row("b", 3, "failed")

    summary = selectors.shards_summary(worst=2)

    assert summary["shards"] == 4 and summary["unfinished"] == 3
    assert summary["by_stage"]["shard_worker"] == {"new": 0, "started": 1, "done": 1, "failed": 2}
    assert [shard["shard"] for shard in summary["worst"]] == [3, 0]  # two failed rows, then one
    assert selectors.shards_most_failed(limit=5) == [(3, 2), (0, 1)]
