"""manage.py rebuildcounts after loads that skipped the triggers, in both databases, and /status
saying when the kept counts disagree (without failing readiness) until they are rebuilt."""

import io
import json

from django.core.management import call_command
from django.db import connections

from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES

TRIGGERLESS_LOADS = {
    "default": [
        "INSERT INTO dl_jobs (job_id, queue, task, lock_key) SELECT gen_random_uuid(), 'restored', 't', 'k' || i "
        "FROM generate_series(1, 40) AS i",
        "INSERT INTO dl_processes (namespace, process_id, status, status_changed_at, last_event_id, created_at) "
        "SELECT 'restored', 'p' || i, 'running', now(), 0, now() FROM generate_series(1, 7) AS i",
    ],
    "pipeline": [
        "INSERT INTO pipeline_tracking (filename, shard) SELECT 'restored.csv', i FROM generate_series(0, 2999) AS i",
        "ANALYZE pipeline_tracking",  # its counts are checked against the planner's estimate
    ],
}


def rebuildcounts(*args) -> list[dict]:
    out = io.StringIO()
    call_command("rebuildcounts", *args, stdout=out)
    return [json.loads(line) for line in out.getvalue().splitlines()]


def load_without_triggers() -> None:
    for alias, statements in TRIGGERLESS_LOADS.items():
        with connections[alias].cursor() as cursor:
            cursor.execute("SET LOCAL session_replication_role = replica")
            for statement in statements:
                cursor.execute(statement)
            cursor.execute("SET LOCAL session_replication_role = origin")


def test_status_says_which_counts_disagree_until_a_rebuild_mends_them_all(api):
    load_without_triggers()

    response = api.get("/status")
    assert response.status_code == 200  # said, not unready: the service works on
    kept = response.json()["kept_counts"]
    assert kept["dl_job_counts"] == {
        "agrees": False,
        "queue values uncounted": ["restored"],
        "queue values counted, not in the table": [],
        "mend": "manage.py rebuildcounts",
    }
    assert kept["dl_process_counts"]["namespace values uncounted"] == ["restored"]
    assert kept["pipeline_tracking_counts"] == {
        "agrees": False,
        "kept": 0,
        "estimated": 3000,
        "mend": "manage.py rebuildcounts",
    }
    assert [answer["counts"] for answer in rebuildcounts("--check") if answer["disagreement"]] == list(kept)

    rebuilt = {answer["table"]: answer for answer in rebuildcounts()}
    assert {table: answer["rows_off"] for table, answer in rebuilt.items()} == {
        "dl_jobs": 40,
        "dl_processes": 7,
        "pipeline_tracking": 3000,
    }
    assert all(answer["rows_off"] == 0 for answer in rebuildcounts())  # a second run: nothing to mend
    assert all(section == {"agrees": True} for section in api.get("/status").json()["kept_counts"].values())


def test_one_counts_table_is_rebuilt_alone():
    load_without_triggers()

    assert [answer["table"] for answer in rebuildcounts("--counts", "dl_process_counts")] == ["dl_processes"]
