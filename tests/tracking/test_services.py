"""Concurrency guarantees of the tracking services, with real threads on a real database."""

from collections import Counter

from rest_framework.test import APIClient

from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import run_in_threads
from tracking import services
from tracking.models import QUEUE_STAGES, PipelineTracking

pytestmark = ALL_DATABASES_COMMITTED

SHARDS = list(range(16))


def test_fifty_threads_registering_one_file_create_each_shard_exactly_once():
    def register(index):
        # Half the threads ask for a subset first, so rows are created by different threads.
        shards = SHARDS if index % 2 else SHARDS[: index % len(SHARDS) + 1]
        return services.file_register(filename="20250101000000", shards=shards).created_shards

    created = run_in_threads(50, register)

    counts = Counter(shard for shards in created for shard in shards)
    assert set(counts) <= set(SHARDS)
    assert all(count == 1 for count in counts.values()), counts
    assert sorted(PipelineTracking.objects.values_list("shard", flat=True)) == sorted(counts)


def test_fifty_concurrent_register_requests(api_token):
    def register(_index):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_token}")
        response = client.post("/api/v1/pipeline/files/register", {"filename": "f", "shards": SHARDS}, format="json")
        return response.status_code, response.json()["created"]

    results = run_in_threads(50, register)

    assert {status for status, _created in results} == {200}
    assert any(created for _status, created in results)
    rows = PipelineTracking.objects.filter(filename="f")
    assert sorted(rows.values_list("shard", flat=True)) == SHARDS
    assert set(rows.values_list("event_ingest_status", flat=True)) == {"started"}


def test_concurrent_claims_never_hand_out_the_same_row():
    for file_index in range(50):
        services.file_register(filename=f"f{file_index:03}", shards=range(10))
    PipelineTracking.objects.update(event_ingest_status="done")
    stage = QUEUE_STAGES["shard-splitter"]

    def claim_until_empty(_index):
        taken = []
        while batch := services.queue_claim(stage=stage, limit=7):
            taken.extend((item.filename, item.shard) for item in batch)
        return taken

    claimed = run_in_threads(4, claim_until_empty)

    everything = [row for rows in claimed for row in rows]
    assert len(everything) == len(set(everything)) == 500
    assert sum(1 for rows in claimed if rows) >= 2, "the claimers should have competed"
    assert set(PipelineTracking.objects.values_list("shard_splitter_status", flat=True)) == {"started"}
