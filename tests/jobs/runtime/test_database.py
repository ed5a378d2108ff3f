"""The runtime's session settings: how its statements are planned, and that they stay its own."""

import pytest
from django.db import connection

from jobs.queue import services
from jobs.queue.services.claims import claim_ctes, claim_params
from jobs.runtime.database import PLANNER_STEERING, configure_session
from pipeline_project.db import sql
from pipeline_project.db.connections import check_pooled_connection

pytestmark = pytest.mark.django_db


def claim_plan() -> str:
    statement = f"EXPLAIN WITH RECURSIVE {claim_ctes()} SELECT * FROM claimed"
    return "\n".join(row[0] for row in sql.rows(statement, claim_params(queue="default", limit=10)))


def test_on_a_nearly_empty_table_the_claim_is_planned_over_indexes_and_the_settings_go_back_with_the_connection():
    """A plan made in a new deployment's first seconds is kept by a worker's connection: with the
    planner's own choice it scans the whole table for each candidate once the table has grown."""
    services.job_enqueue_many(
        specs=[services.JobSpec(queue="default", task="test.noop", lock_key=f"key-{n}") for n in range(3)]
    )
    sql.execute("ANALYZE dl_jobs", {})
    assert "Seq Scan on dl_jobs" in claim_plan()  # what the planner chooses for three rows by itself

    configure_session("off")
    try:
        assert "Seq Scan on dl_jobs" not in claim_plan()
    finally:
        check_pooled_connection(connection.connection)  # what the pool does before lending it on

    for name in PLANNER_STEERING:
        assert sql.rows(f"SHOW {name}", {}) == [("on",)]
    assert sql.rows("SHOW synchronous_commit", {}) == [("on",)]
