"""The state tabs, their lists and the job page's reasons at size: on tests/test_plans_at_size.py's
seeded tables (60,000 jobs, 240,000 events) with queued jobs of every state added, no statement of
the list (any tab, with a queue, a task, a search, an older page, the live fragment) or of a queued
job's page reads a big table whole; the queued counts read ix_dl_jobs_claim by queue and available_at."""

import json
import re

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client

from jobs.queue.console.job_states import COUNTED_AT_MOST, QUEUED_RANGES, STATES
from jobs.queue.states import WAITING_AVAILABLE_AT
from tests.conftest import ALL_DATABASES
from tests.test_plans_at_size import big_table_reads, full_reads, seeded  # noqa: F401 (the fixture)

pytestmark = [ALL_DATABASES, pytest.mark.slow]

JOBS = "/admin/jobs/job/"
# Besides the seed's 600 due jobs: per queue, 5 scheduled, 5 retryable (due in a day) and 5 waiting.
MORE_QUEUED = """
INSERT INTO dl_jobs (job_id, queue, task, lock_key, status, attempt, available_at, created_at)
SELECT gen_random_uuid(), 'queue-' || (i %% 20), 'task.' || (i %% 30), 'more-' || i, 'queued',
       CASE WHEN i %% 3 = 1 THEN 1 ELSE 0 END,
       CASE WHEN i %% 3 = 2 THEN %(waiting)s ELSE now() + interval '1 day' END, now()
FROM generate_series(1, 300) AS i
"""


@pytest.fixture
def browser(seeded):  # noqa: F811 (the imported fixture)
    with connections["default"].cursor() as cursor:
        cursor.execute(MORE_QUEUED, {"waiting": WAITING_AVAILABLE_AT})
        cursor.execute("ANALYZE dl_jobs")
    user = get_user_model().objects.create_superuser("planner", password="plans-at-size-1")
    client = Client()
    client.force_login(user)
    return client


def paths() -> list[str]:
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT job_id FROM dl_jobs WHERE status = 'succeeded' ORDER BY job_id DESC OFFSET 20000 LIMIT 1"
        )
        [(deep,)] = cursor.fetchall()
        cursor.execute(
            "SELECT min(job_id::text) FILTER (WHERE available_at <= now()), "
            "min(job_id::text) FILTER (WHERE available_at > now() AND available_at < %s), "
            "min(job_id::text) FILTER (WHERE available_at >= %s) FROM dl_jobs WHERE status = 'queued'",
            [WAITING_AVAILABLE_AT, WAITING_AVAILABLE_AT],
        )
        queued = cursor.fetchone()
    return [
        *(f"{JOBS}?state={state}" for state in STATES),
        *(f"{JOBS}?state={state}&queue=queue-3" for state in STATES),
        *(f"{JOBS}?state={state}&task=task.7" for state in ("available", "scheduled", "waiting", "retryable")),
        f"{JOBS}?state=available&queue=no-such-queue",
        f"{JOBS}?state=failed&q=key-41",
        f"{JOBS}?state=succeeded&before={deep}",
        f"{JOBS}?state=scheduled&fragment=1",
        f"{JOBS}?fragment=1",
        *(f"{JOBS}{job_id}/change/" for job_id in queued),
    ]


def test_no_tab_list_count_or_queued_job_page_reads_a_big_table_whole(browser):
    scans = big_table_reads(browser, paths())
    assert not scans, json.dumps(scans, indent=1)
    # The tabs' counts of queued jobs (seeded once: these share the seed).
    for task in (None, "task.7"):
        assert_the_queued_counts_read_each_queues_ranges_of_the_claim_index(task)


def index_reads(plan: dict) -> list[tuple[str, str]]:
    nodes, found = [plan["Plan"]], []
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        if node.get("Relation Name") == "dl_jobs":
            found.append((node.get("Index Name", node["Node Type"]), node.get("Index Cond", "")))
    return found


def assert_the_queued_counts_read_each_queues_ranges_of_the_claim_index(task):
    params = {
        "queues": [f"queue-{n}" for n in range(20)],
        "read": COUNTED_AT_MOST + 1,
        "waiting": WAITING_AVAILABLE_AT,
        "task": task,
    }
    with connections["default"].cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")  # as job_states plans it
        assert full_reads("default", QUEUED_RANGES, params) == []
        cursor.execute(f"EXPLAIN (FORMAT JSON) {QUEUED_RANGES}", params)
        [plan] = cursor.fetchone()[0]

    reads = index_reads(plan)
    assert len(reads) == 3, reads  # the due, later and waiting ranges
    for index, condition in reads:
        assert index == "ix_dl_jobs_claim" and re.search(r"queue = q(_\d)?\.name", condition), reads
        assert "available_at" in condition, reads
