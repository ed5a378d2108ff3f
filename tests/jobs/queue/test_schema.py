"""The migrated dl_jobs/dl_job_events are the seed 002 DDL: applied to a scratch database, compared."""

from pathlib import Path

import psycopg
import pytest
from django.db import connections
from psycopg import sql

from jobs.queue.services.claims import KEY_FREE
from pipeline_project.db.connections import connection_params
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES

SEED_DDL = (Path(__file__).parent / "seed_002_ddl.sql").read_text()
TABLES = ("dl_jobs", "dl_job_events")
# Indexes the project adds for its own queries (listed in the manual); nothing else may differ.
EXTRA_INDEXES = {
    "ix_dl_jobs_claim_order",
    "ix_dl_jobs_queued_lock_key",
    "ix_dl_jobs_created_brin",
    "ix_dl_jobs_finished",
    "ux_dl_jobs_running_lock_key",
    "ix_dl_job_events_job",
    "ix_dl_job_events_ts_brin",
    "ix_dl_jobs_ingestion_run",  # ingestion's: a run's jobs
    # The lists' filters at production size.
    "ix_dl_jobs_queue_job",
    "ix_dl_jobs_task_job",
    "ix_dl_jobs_queue_status_job",
    "ix_dl_jobs_task_status_job",
    "ix_dl_jobs_lock_key_job",
    "ix_dl_jobs_partition_job",
    "ix_dl_jobs_args",
    "ix_dl_jobs_errored",
    "ix_dl_jobs_signature",  # retention's maxIdentical
    "ix_dl_jobs_running_lock_key",  # the claim's running-key probe
}


def describe(conn: psycopg.Connection) -> dict:
    return {
        "columns": conn.execute(
            """
            SELECT table_name, ordinal_position, column_name, data_type, udt_name, is_nullable, column_default
            FROM information_schema.columns WHERE table_schema = 'public' AND table_name = ANY(%s)
            ORDER BY table_name, ordinal_position
            """,
            [list(TABLES)],
        ).fetchall(),
        "enum": [
            row[0]
            for row in conn.execute(
                "SELECT enumlabel FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid WHERE t.typname = 'dl_status' ORDER BY enumsortorder"
            )
        ],
        "indexes": dict(
            conn.execute(  # indexdef: pg_get_indexdef
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = ANY(%s)",
                [list(TABLES)],
            )
        ),
        "constraints": dict(
            conn.execute(
                """
                SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid
                WHERE t.relname = ANY(%s)
                """,
                [list(TABLES)],
            )
        ),
    }


@pytest.fixture
def seed_schema():
    """A scratch database built from the seed DDL, described, then dropped."""
    params = connection_params("default")
    scratch = f"{params['dbname']}_seed_ddl"
    admin = {**params, "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(scratch)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(scratch)))
    try:
        with psycopg.connect(**{**params, "dbname": scratch}, autocommit=True) as conn:
            conn.execute(SEED_DDL)
            yield describe(conn)
    finally:
        with psycopg.connect(**admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(scratch)))


@pytest.fixture
def migrated_schema():
    connections["default"].ensure_connection()
    with psycopg.connect(**connection_params("default")) as conn:
        return describe(conn)


def test_columns_types_nullability_and_defaults_match_the_seed(seed_schema, migrated_schema):
    assert migrated_schema["columns"] == seed_schema["columns"]


def test_status_enum_matches_the_seed(seed_schema, migrated_schema):
    assert (
        migrated_schema["enum"]
        == seed_schema["enum"]
        == ["queued", "running", "succeeded", "failed", "canceled", "lost"]
    )


def test_constraints_match_the_seed(seed_schema, migrated_schema):
    assert migrated_schema["constraints"] == seed_schema["constraints"]
    assert "dl_jobs_chk_positive" in migrated_schema["constraints"]
    assert "ON DELETE CASCADE" in migrated_schema["constraints"]["dl_job_events_job_id_fkey"]


def test_seed_indexes_are_defined_as_the_seed_defines_them(seed_schema, migrated_schema):
    # Other services rely on them: each index the seed's DDL makes is, under its name, what
    # PostgreSQL's pg_get_indexdef says of it there (columns, predicate), not a variant of it.
    seeds = seed_schema["indexes"]
    assert {"ix_dl_jobs_claim", "ix_dl_jobs_running_lease", "ix_dl_jobs_status_queue"} <= set(seeds)
    assert {name: migrated_schema["indexes"].get(name) for name in seeds} == seeds


def test_extra_indexes_are_the_documented_ones(seed_schema, migrated_schema):
    assert set(migrated_schema["indexes"]) - set(seed_schema["indexes"]) == EXTRA_INDEXES


def test_the_claims_running_key_probe_reaches_no_seed_index():
    # As the seed writes them, its indexes of running jobs could serve a probe for status = 'running',
    # and after an ANALYZE under a held xmin the planner walked them end to end (jobs.queue.models,
    # ix_dl_jobs_running_lock_key). Without its own index and the lock_key one, none is left to it.
    probe = KEY_FREE.format(key="%(key)s")
    with connections["default"].cursor() as cursor:  # the test's transaction puts both back
        cursor.execute("DROP INDEX ix_dl_jobs_running_lock_key, ix_dl_jobs_lock_key_job")
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN SELECT {probe}", {"key": "key-1", "ending": []})
        plan = "\n".join(line for (line,) in cursor.fetchall())
    assert "Seq Scan on dl_jobs r" in plan and "Index" not in plan, plan
