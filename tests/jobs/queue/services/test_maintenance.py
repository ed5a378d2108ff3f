"""Housekeeping of the queue's tables: the planner's statistics of dl_jobs follow a burst; its dead
row versions are vacuumed away."""

import json
import time
import uuid

import psycopg
import pytest
from django.db import connection

from jobs.queue import services
from jobs.queue.models import Worker
from jobs.queue.services.maintenance import STATISTICS_MIN_PAGES
from jobs.queue.worker.housekeeping import DeadWorkers
from jobs.runtime.database import session_lock_take
from jobs.runtime.names import worker_session_key
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES_COMMITTED

pytestmark = ALL_DATABASES_COMMITTED


def believed_queued() -> float:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) SELECT 1 FROM dl_jobs WHERE status = 'queued'")
        plan = cursor.fetchone()[0]
    return (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]["Plan Rows"]


def queue_jobs(count: int, status: str = "queued") -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO dl_jobs (job_id, queue, task, lock_key, status, finished_at) "
            "SELECT gen_random_uuid(), 'burst', 'jobs.noop', 'k' || n, %s, "
            "CASE WHEN %s = 'queued' THEN NULL ELSE now() END FROM generate_series(1, %s) AS n",
            [status, status, count],
        )


def test_a_burst_on_a_queue_analyzed_empty_is_analyzed_once():
    queue_jobs(20_000, status="succeeded")  # what a retained history looks like
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE dl_jobs")  # while nothing was queued
    queue_jobs(5_000)
    assert believed_queued() < 500

    assert services.jobs_statistics_refresh() is True
    assert believed_queued() > 2_500
    assert services.jobs_statistics_refresh() is False  # the picture is right now


def pages() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_relation_size('dl_jobs') / current_setting('block_size')::int")
        return cursor.fetchone()[0]


def test_a_table_never_analyzed_is_analyzed_once_it_holds_jobs_whatever_their_status():
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE oid = 'dl_jobs'::regclass")
        assert cursor.fetchone()[0] < 0  # a new table: never analyzed (the planner goes by its size)
    queue_jobs(200, status="succeeded")
    assert pages() < STATISTICS_MIN_PAGES and services.jobs_statistics_refresh() is False  # a few rows: no reason yet
    while pages() < STATISTICS_MIN_PAGES:
        queue_jobs(500, status="succeeded")  # a queue that keeps up: few queued, many done

    assert services.jobs_statistics_refresh() is True
    assert services.jobs_statistics_refresh() is False


def test_a_table_analyzed_small_is_analyzed_again_when_it_has_grown_tenfold():
    while pages() < STATISTICS_MIN_PAGES:
        queue_jobs(500, status="succeeded")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE dl_jobs")
    measured = pages()
    while pages() < 9 * measured:
        queue_jobs(500, status="succeeded")
    assert services.jobs_statistics_refresh() is False  # not tenfold yet
    while pages() < 10 * measured:
        queue_jobs(500, status="succeeded")

    assert services.jobs_statistics_refresh() is True
    assert services.jobs_statistics_refresh() is False


def test_a_table_analyzed_empty_is_analyzed_once_it_holds_jobs():
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE dl_jobs")  # a new deployment's, or a test's fresh tables
    while pages() < STATISTICS_MIN_PAGES:
        queue_jobs(500, status="succeeded")

    assert services.jobs_statistics_refresh() is True


def test_a_few_queued_jobs_are_no_reason_to_analyze():
    queue_jobs(500)

    assert services.jobs_statistics_refresh() is False


def vacuum_statistics() -> dict:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT n_dead_tup, n_live_tup, vacuum_count, autovacuum_count, analyze_count, autoanalyze_count "
            "FROM pg_stat_user_tables WHERE relid = 'dl_jobs'::regclass"
        )
        return dict(zip([column.name for column in cursor.description], cursor.fetchone(), strict=True))


def dead_rows() -> int:
    return vacuum_statistics()["n_dead_tup"]


def dead_rows_reach(count: int) -> None:
    """Wait for the statistics. A backend reports its counts when idle, at most once a second, and
    skips a report when another holds the table's entry (a CI run saw none for 10 s): this one's
    next report is forced."""
    deadline = time.monotonic() + 10
    while True:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_force_next_flush()")
        if dead_rows() >= count:
            return
        assert time.monotonic() < deadline, f"dl_jobs shows {dead_rows()} dead rows, not {count}"
        time.sleep(0.2)


def claim_head_buffers() -> int:
    """Buffers the claim's first read touches to find the queue's first queued job."""
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT job_id FROM dl_jobs WHERE status = 'queued' "
            "AND queue = 'burst' AND available_at <= now() ORDER BY priority, created_at, job_id LIMIT 1"
        )
        plan = cursor.fetchone()[0]
    return (plan if isinstance(plan, list) else json.loads(plan))[0]["Plan"]["Shared Hit Blocks"]


def claim_all_but(left: int) -> None:
    """Run every queued job but the last ``left`` (in claim order), as claims and their ends do:
    each job's queued version dies, in front of those left."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE dl_jobs SET status = 'succeeded', finished_at = now() WHERE job_id IN "
            "(SELECT job_id FROM dl_jobs WHERE status = 'queued' "
            "ORDER BY priority DESC, created_at DESC, job_id DESC OFFSET %s)",
            [left],
        )


@pytest.fixture
def no_autovacuum():
    """Autovacuum off on dl_jobs for the test (20,000 dead rows would call it in mid-test)."""
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE dl_jobs SET (autovacuum_enabled = false)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE dl_jobs RESET (autovacuum_enabled)")


def test_dead_row_versions_past_the_threshold_are_vacuumed_and_the_claims_head_is_short_again(no_autovacuum):
    queue_jobs(20_000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE dl_jobs")  # the planner knows the backlog: it reads the claim's order
    # A snapshot held until the vacuum: else reads prune the heap pages they visit, and the dead rows
    # they remove no longer count toward the threshold (a CI run's vacuum found fewer than 5,000).
    with psycopg.connect(**connection_params("default"), autocommit=True) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT pg_current_xact_id()")
        claim_all_but(10)
        dead_rows_reach(20_000 - 10)
        walked = claim_head_buffers()  # what every claim reads until a vacuum
        holder.execute("ROLLBACK")

    seen = vacuum_statistics()
    vacuumed = services.jobs_vacuum(min_dead_rows=5_000)
    assert vacuumed >= 20_000 - 10, {"before": seen, "after": vacuum_statistics()}  # who else vacuumed, if so

    assert dead_rows() < 1_000
    assert claim_head_buffers() < walked / 5
    assert services.jobs_vacuum(min_dead_rows=5_000) == 0  # nothing left to vacuum


def test_fewer_dead_row_versions_than_the_threshold_are_left_to_autovacuum(no_autovacuum):
    queue_jobs(2_000)
    claim_all_but(10)
    dead_rows_reach(2_000 - 10)

    assert services.jobs_vacuum(min_dead_rows=5_000) == 0
    assert dead_rows() >= 2_000 - 10


def register_worker(pid: int) -> uuid.UUID:
    worker_id = uuid.uuid4()
    services.worker_register(worker_id=worker_id, hostname="host", pid=pid, queues={"default": 1})
    return worker_id


def test_a_worker_is_seen_without_its_session_unless_the_server_has_just_started():
    alive, gone = register_worker(1), register_worker(2)
    with psycopg.connect(**connection_params(), autocommit=True) as session:
        session_lock_take(session, worker_session_key(alive))
        closed = {worker_id for worker_id, _beat, _now in services.workers_without_session(server_up_for_sec=0)}
        just_started = services.workers_without_session(server_up_for_sec=10**9)

    assert closed == {gone}
    assert just_started == []


def test_a_worker_is_gone_once_its_session_stayed_closed_and_it_did_not_beat_since():
    beating, silent = register_worker(1), register_worker(2)
    dead_workers = DeadWorkers(confirm_sec=0.3)

    assert dead_workers()["gone"] == 0  # first seen closed: not yet
    time.sleep(0.4)
    services.worker_heartbeat(worker_id=beating, running_jobs=0)  # alive, reconnecting its session

    assert dead_workers()["gone"] == 1
    assert set(Worker.objects.values_list("worker_id", flat=True)) == {beating}
    assert silent not in dead_workers.closed_since
