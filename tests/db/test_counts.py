"""Counts kept by statement triggers (on dl_jobs, the first table counted): they match a recount
whatever writes, with writers racing the fold; two writers never wait for each other on them."""

import random
import threading

import psycopg
from django.db import connections

from jobs.queue.models import JOB_COUNTS
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, run_in_threads

pytestmark = ALL_DATABASES_COMMITTED

RECOUNT = "SELECT queue, task, status::text, count(*) FROM dl_jobs GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
INSERT = (
    "INSERT INTO dl_jobs (job_id, queue, task, lock_key) "
    "SELECT gen_random_uuid(), %(queue)s, %(task)s, md5(random()::text) FROM generate_series(1, %(n)s)"
)


def counted() -> list[tuple]:
    return sorted((queue, task, str(status), n) for queue, task, status, n in JOB_COUNTS.read())


def recounted() -> list[tuple]:
    with raw_connection() as conn:
        return sorted(conn.execute(RECOUNT).fetchall())


def test_the_counts_match_a_recount_whatever_writes_while_folds_race_the_writers():
    folding = threading.Event()

    def fold_until_told():
        try:
            while not folding.is_set():
                JOB_COUNTS.compact()
        finally:
            connections.close_all()

    def write(index: int) -> None:
        rng = random.Random(index)
        with raw_connection(autocommit=True) as conn:
            for _ in range(40):
                queue, task = rng.choice(["a", "b"]), rng.choice(["t1", "t2", "t3"])
                conn.execute(INSERT, {"queue": queue, "task": task, "n": rng.randint(1, 20)})
                conn.execute(
                    # SKIP LOCKED: writers picking rows in random orders would deadlock on each
                    # other's rows, which is not what this test is about
                    "UPDATE dl_jobs SET status = %(status)s WHERE job_id IN (SELECT job_id FROM dl_jobs"
                    " WHERE queue = %(queue)s ORDER BY random() LIMIT 5 FOR UPDATE SKIP LOCKED)",
                    {"status": rng.choice(["running", "succeeded", "failed"]), "queue": queue},
                )
                if rng.random() < 0.3:
                    conn.execute(
                        "DELETE FROM dl_jobs WHERE job_id IN (SELECT job_id FROM dl_jobs LIMIT 3 FOR UPDATE SKIP LOCKED)"
                    )

    folder = threading.Thread(target=fold_until_told)
    folder.start()
    try:
        run_in_threads(4, write)
    finally:
        folding.set()
        folder.join()

    assert counted() == recounted()
    JOB_COUNTS.compact()
    assert counted() == recounted()
    with raw_connection() as conn:  # folded: one row per combination
        assert conn.execute("SELECT count(*) FROM dl_job_counts").fetchone()[0] == len(recounted())
        conn.execute("TRUNCATE dl_jobs CASCADE")
        conn.commit()
    assert counted() == []


def test_two_writers_changing_the_same_queue_do_not_wait_for_each_other():
    with raw_connection(autocommit=True) as conn:
        conn.execute(INSERT, {"queue": "shared", "task": "t", "n": 2})
        first, second = (row[0] for row in conn.execute("SELECT job_id FROM dl_jobs ORDER BY job_id").fetchall())
    with raw_connection() as one, raw_connection() as other:
        one.execute("UPDATE dl_jobs SET status = 'running' WHERE job_id = %s", [first])  # open: its rows stay locked
        other.execute("SET statement_timeout = '2s'")
        try:
            other.execute("UPDATE dl_jobs SET status = 'running' WHERE job_id = %s", [second])
        except psycopg.errors.QueryCanceled:
            raise AssertionError("the second writer waited for the first one's counts") from None
        other.commit()
        one.commit()

    assert counted() == [("shared", "t", "running", 2)]


def load_without_triggers(conn: psycopg.Connection) -> None:
    """What pg_restore --disable-triggers or logical replication's apply do: rows in, changed and
    out, with no trigger firing (session_replication_role = replica)."""
    conn.execute("SET session_replication_role = replica")
    conn.execute(INSERT, {"queue": "restored", "task": "t1", "n": 300})
    conn.execute(
        "UPDATE dl_jobs SET status = 'failed' WHERE queue = 'a' AND job_id IN (SELECT job_id FROM dl_jobs WHERE queue = 'a' LIMIT 4)"
    )
    conn.execute(
        "DELETE FROM dl_jobs WHERE queue = 'b' AND job_id IN (SELECT job_id FROM dl_jobs WHERE queue = 'b' LIMIT 2)"
    )
    conn.execute("RESET session_replication_role")


def test_a_rebuild_after_a_load_without_triggers_mends_the_counts_while_writers_work_and_twice_changes_nothing():
    with raw_connection(autocommit=True) as conn:
        conn.execute(INSERT, {"queue": "a", "task": "t1", "n": 50})
        conn.execute(INSERT, {"queue": "b", "task": "t2", "n": 50})
        load_without_triggers(conn)
    assert counted() != recounted()
    assert JOB_COUNTS.disagreement(sample_rows=1000) is not None

    writing = threading.Event()

    def write_until_told():  # through the triggers, racing the rebuild's statements
        with raw_connection(autocommit=True) as conn:
            while not writing.is_set():
                conn.execute(INSERT, {"queue": random.choice(["a", "b", "restored", "new"]), "task": "t1", "n": 3})
                conn.execute(
                    "UPDATE dl_jobs SET status = 'running' WHERE job_id IN (SELECT job_id FROM dl_jobs WHERE status = 'queued' LIMIT 2 FOR UPDATE SKIP LOCKED)"
                )

    writer = threading.Thread(target=write_until_told)
    writer.start()
    try:
        rebuilt = [JOB_COUNTS.rebuild() for _ in range(3)]
    finally:
        writing.set()
        writer.join()
        connections.close_all()

    # Combinations: restored in, 4 of a moved from queued to failed (out and in), 2 of b out.
    assert rebuilt[0]["corrected"] == 4 and rebuilt[0]["rows_off"] == 300 + 4 + 4 + 2
    assert [run["corrected"] for run in rebuilt[1:]] == [
        0,
        0,
    ]  # idempotent, the writer's changes counted by their triggers
    assert counted() == recounted()
    assert JOB_COUNTS.disagreement(sample_rows=1000) is None


def test_the_disagreement_names_a_value_the_counts_miss_and_a_small_batch_counted_wrong():
    with raw_connection(autocommit=True) as conn:
        conn.execute(INSERT, {"queue": "a", "task": "t1", "n": 30})
        assert JOB_COUNTS.disagreement(sample_rows=1000) is None
        conn.execute("SET session_replication_role = replica")
        conn.execute(INSERT, {"queue": "restored", "task": "t1", "n": 5})
        assert JOB_COUNTS.disagreement(sample_rows=1000) == {
            "queue values uncounted": ["restored"],
            "queue values counted, not in the table": [],
        }
        conn.execute("DELETE FROM dl_jobs WHERE queue = 'restored'")
        conn.execute("DELETE FROM dl_jobs WHERE job_id IN (SELECT job_id FROM dl_jobs LIMIT 3)")
    # The least queue (a: 30 kept, 27 there) counted exactly; past sample_rows it is not read.
    assert JOB_COUNTS.disagreement(sample_rows=1000) == {"queue": "a", "kept": 30, "counted": 27}
    assert JOB_COUNTS.disagreement(sample_rows=29) is None
