"""Housekeeping of the queue's tables: the planner's statistics of dl_jobs follow a burst; its dead
row versions are vacuumed away."""

import json
import time

import pytest
from django.db import connection

from jobs import services
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


def test_a_few_queued_jobs_are_no_reason_to_analyze():
    queue_jobs(500)

    assert services.jobs_statistics_refresh() is False


def dead_rows() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relid = 'dl_jobs'::regclass")
        return cursor.fetchone()[0]


def dead_rows_reach(count: int) -> None:
    """Wait for the statistics (each backend reports its counts within a second or so)."""
    deadline = time.monotonic() + 10
    while dead_rows() < count:
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
    claim_all_but(10)
    dead_rows_reach(20_000 - 10)
    claim_head_buffers()  # the first read past the dead entries marks them dead in the index
    walked = claim_head_buffers()  # what every later claim reads until a vacuum

    assert services.jobs_vacuum(min_dead_rows=5_000) >= 20_000 - 10

    assert dead_rows() < 1_000
    assert claim_head_buffers() < walked / 5
    assert services.jobs_vacuum(min_dead_rows=5_000) == 0  # nothing left to vacuum


def test_fewer_dead_row_versions_than_the_threshold_are_left_to_autovacuum():
    queue_jobs(2_000)
    claim_all_but(10)
    dead_rows_reach(2_000 - 10)

    assert services.jobs_vacuum(min_dead_rows=5_000) == 0
    assert dead_rows() >= 2_000 - 10
