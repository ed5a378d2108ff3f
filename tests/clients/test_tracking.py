"""Seed 000's daemons written with the client, against the service as deployed: event-ingest
registers a file, each stage's daemon is one ``tracking.work`` call."""

import threading

import pytest
from pipeline_client import ConflictError, NotFoundError

from tests.clients.helpers import client, token
from tests.conftest import ALL_DATABASES_COMMITTED

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]


def statuses(tracking, filename: str, stage: str) -> list[str]:
    return [shard.status_of(stage) for shard in tracking.file(filename).shards]


def test_the_daemons_loops_move_a_file_through_every_stage_and_a_failing_shard_is_marked_failed(service_url):
    tracking = client(service_url, token()).tracking
    filename = "20250101000000"
    assert tracking.register(filename, [0, 1, 2]).created
    assert tracking.event_ingest_done(filename).updated_rows == 3

    split = tracking.work("shard-splitter", lambda item: None, batch_size=2, stop_when_idle=True)
    assert sorted(item.shard for item in split.done) == [0, 1, 2] and not split.failed

    def shard_worker(item):
        if item.shard == 1:
            raise RuntimeError("shard 1 is corrupt")

    worked = tracking.work("shard-worker", shard_worker, stop_when_idle=True)
    assert sorted(item.shard for item in worked.done) == [0, 2]
    assert [(item.shard, why) for item, why in worked.failed] == [(1, "RuntimeError: shard 1 is corrupt")]
    assert statuses(tracking, filename, "shard-worker") == ["done", "failed", "done"]

    sent = tracking.work("mysql-sender", lambda item: None, stop_when_idle=True)
    assert sorted(item.shard for item in sent.done) == [0, 2]  # shard 1 is not ready for it

    assert tracking.retry("shard-worker", filename, 1).status == "new"
    assert [item.shard for item in tracking.work("shard-worker", lambda item: None, stop_when_idle=True).done] == [1]
    assert [item.shard for item in tracking.work("mysql-sender", lambda item: None, stop_when_idle=True).done] == [1]
    assert statuses(tracking, filename, "mysql-sender") == ["done", "done", "done"]
    assert tracking.summary().by_shard == [{"shard": n, "total": 1, "done": 1, "failed": 0} for n in range(3)]


def test_a_stopped_loop_returns_the_rest_of_its_batch_to_the_queue(service_url):
    tracking = client(service_url, token()).tracking
    tracking.register("stopped", [0, 1, 2])
    tracking.event_ingest_done("stopped")
    stop = threading.Event()

    report = tracking.work("shard-splitter", lambda item: stop.set(), batch_size=3, stop=stop)

    assert [item.shard for item in report.done] == [0]
    assert statuses(tracking, "stopped", "shard-splitter") == ["done", "new", "new"]
    assert [item.shard for item in tracking.queue("shard-splitter")] == [1, 2]


def test_a_queue_is_read_page_by_page(service_url):
    tracking = client(service_url, token()).tracking
    tracking.register("paged", list(range(5)))
    tracking.event_ingest_done("paged")

    assert [item.shard for item in tracking.queue("shard-splitter", limit=2)] == [0, 1, 2, 3, 4]


def test_illegal_moves_are_conflicts_and_unknown_stages_not_found(service_url):
    tracking = client(service_url, token()).tracking
    tracking.register("early", [0])
    tracking.event_ingest_done("early")

    with pytest.raises(ConflictError) as early:
        tracking.start("shard-worker", "early", 0)
    assert early.value.code == "previous_stage_not_done"
    assert tracking.fail("shard-splitter", "early", 0).status == "failed"
    with pytest.raises(ConflictError) as illegal:
        tracking.done("shard-splitter", "early", 0)
    assert illegal.value.code == "illegal_transition"
    with pytest.raises(NotFoundError) as unknown:
        tracking.claim("event-ingest")
    assert unknown.value.code == "unknown_stage"
