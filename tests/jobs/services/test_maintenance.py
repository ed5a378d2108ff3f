"""Housekeeping of the queue's tables: the planner's statistics of dl_jobs follow a burst."""

import json

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
