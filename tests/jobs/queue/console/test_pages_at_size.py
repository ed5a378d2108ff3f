"""The console's queue, worker and dashboard reads at size (tests/test_plans_at_size.py's seed, and a
throughput table at its retention's worst: 20 queues, two statuses, a row in every minute of the
last two days and every hour of the 33 before): the hour and the day read their range of the
throughput table through its index on minute, the week that table alone, and no read of any
window walks the jobs or their journal whole."""

import time

import pytest
from django.db import connections
from django.test import Client

from jobs.queue import activity, throughput
from jobs.queue.console import charts
from tests.conftest import ALL_DATABASES
from tests.helpers import capturing
from tests.test_plans_at_size import big_table_reads, full_reads, seeded  # noqa: F401 (the seed, a fixture)

pytestmark = [ALL_DATABASES, pytest.mark.slow]

SEED_THROUGHPUT = """
INSERT INTO dl_job_throughput (queue, status, minute, n, folded)
SELECT 'queue-' || q, s::dl_status, m, 1 + q, true
FROM generate_series(0, 19) AS q, unnest(ARRAY['succeeded', 'failed']) AS s,
     LATERAL (SELECT date_bin('1 hour', now() - interval '2 days', TIMESTAMPTZ '2000-01-01 00:00:00+00') AS hours_end) b,
     LATERAL (
         SELECT generate_series(b.hours_end - interval '33 days', b.hours_end - interval '1 hour', interval '1 hour')
         UNION ALL
         SELECT generate_series(b.hours_end, now(), interval '1 minute')
     ) AS ms(m)
ORDER BY m;  -- as the triggers and the fold write them: in time order
ANALYZE dl_job_throughput;
"""


@pytest.fixture
def throughput_rows(seeded):  # noqa: F811 (the fixture imported above)
    with connections["default"].cursor() as cursor:
        cursor.execute(SEED_THROUGHPUT)
        cursor.execute("SELECT count(*) FROM dl_job_throughput")
        return cursor.fetchone()[0]


def plan_nodes(sql: str, params: dict) -> list[dict]:
    with connections["default"].cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        [plan] = cursor.fetchone()[0]
    nodes, found = [plan["Plan"]], []
    while nodes:
        node = nodes.pop()
        nodes.extend(node.get("Plans", []))
        found.append(node)
    return found


def window_read(name: str) -> tuple[str, dict]:
    buckets = charts.Buckets.now(charts.WINDOWS[name])
    with capturing() as captured:
        buckets.finished()
    [(_alias, sql, params)] = captured
    return sql, params


def timed(sql: str, params: dict) -> float:
    started = time.monotonic()
    with connections["default"].cursor() as cursor:
        cursor.execute(sql, params)
    return time.monotonic() - started


@pytest.mark.parametrize("name", ["hour", "day"])
def test_the_hour_and_the_day_read_their_range_of_the_throughput_table_by_its_index(throughput_rows, name):
    assert throughput_rows > 140_000
    sql, params = window_read(name)

    nodes = plan_nodes(sql, params)

    scans = [node for node in nodes if node.get("Relation Name") == throughput.TABLE]
    assert scans and all(node["Node Type"] != "Seq Scan" for node in scans), [n["Node Type"] for n in scans]
    assert {node.get("Index Name") for node in nodes if "Index Name" in node} == {"ix_dl_job_throughput_minute"}
    assert timed(sql, params) < 2.0  # a generous bound on a shared machine


def test_the_week_reads_the_throughput_table_alone_and_in_a_bounded_time(throughput_rows):
    # Its last two days are minutes: most of the table at its worst, which the planner may read whole
    # (the table is bounded by the retention and the queues, not by the jobs that finish).
    sql, params = window_read("week")

    nodes = plan_nodes(sql, params)

    assert {node["Relation Name"] for node in nodes if "Relation Name" in node} == {throughput.TABLE}
    assert timed(sql, params) < 2.0


def test_the_times_and_running_jobs_read_no_big_table_whole(seeded):  # noqa: F811
    for statement, params in (
        (activity.WAITS, {"events": activity.TIMES_EVENTS, "minutes": activity.TIMES_MINUTES}),
        (activity.RUNS, {"events": activity.TIMES_EVENTS, "minutes": activity.TIMES_MINUTES}),
        (activity.RUNNING, {"names": ["host:1:abcdef12"], "limit": 1001}),
    ):
        assert full_reads("default", statement, params) == []


def test_the_pages_in_every_window_read_no_big_table_whole(throughput_rows, admin_user):
    browser = Client()
    browser.force_login(admin_user)
    paths = [
        f"{page}?window={name}"
        for page in ("/admin/jobs/job/dashboard/", "/admin/jobs/queue/")
        for name in charts.WINDOWS
    ]

    scans = big_table_reads(browser, [*paths, "/admin/jobs/worker/"])
    assert not scans, scans
