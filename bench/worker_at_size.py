"""The worker at production size: drain and pickup on the seeded big tables beside an empty
database, then retention deleting old history while jobs churn.

    .venv/bin/python bench/worker_at_size.py                  # after `bench/big_tables.py seed`
    .venv/bin/python bench/worker_at_size.py --rounds 3 --churn-sec 60

1. Drain and pickup, the two databases taking turns over ``--rounds``: ``--jobs`` no-op jobs
   queued, one `runworker --queue bench:16 --no-reaper` (housekeeping off: nothing but the queue) until they all succeeded (jobs/s from the first start
   to the last finish); then ``--pickups`` jobs enqueued one at a time to the idle worker (ms from
   the job's insert to its start). The big database is ``<BENCH_DB_PREFIX>_control`` (``big``,
   seeded by bench/big_tables.py, never dropped; the bench's jobs are deleted afterwards); the
   empty one is created and dropped here.
2. Retention under churn, on the big database: a producer enqueues ``--churn-rate`` jobs/s and the
   worker runs them, ``--churn-sec`` without retention, then as long with retention's statements
   (`jobs_prune`'s, batch after batch, seeded history older than ``--age-days``) in a loop beside
   them: each batch's time (the longest is the longest any lock retention takes is held), jobs
   deleted per second, and the queue wait (insert → start) of the churning jobs in each phase.

Targets: drain and pickup p99 at size within 1.1x of the empty database; retention deletes faster
than the churn adds, no batch over 1 s, the churn's queue wait p99 not raised by it.
"""

import argparse
import os
import statistics
import threading
import time

import psycopg
from common import BENCH_DATABASES, bench_env, create_bench_databases, server_params
from jobs_queue import QUEUE, quantile, runworker, verdict, wait_until
from psycopg import sql

CONCURRENCY = 16
SIZE_RATIO_TARGET = 1.1
LOCK_TARGET_SEC = 1.0
ENQUEUE_SQL = """
    INSERT INTO dl_jobs (job_id, queue, task, lock_key)
    SELECT id, %(queue)s, 'jobs.noop', %(queue)s || '-' || id FROM unnest(%(ids)s::uuid[]) AS id
"""


def environment(params: dict, prefix: str) -> dict:
    return bench_env(params, {"default": f"{prefix}_control", "pipeline": f"{prefix}_pipeline"})


def connect(params: dict, prefix: str) -> psycopg.Connection:
    return psycopg.connect(**{**params, "dbname": f"{prefix}_control"}, autocommit=True)


def enqueue(conn: psycopg.Connection, count: int) -> None:
    from jobs.queue.models import uuid7

    for start in range(0, count, 1000):
        conn.execute(ENQUEUE_SQL, {"queue": QUEUE, "ids": [uuid7() for _ in range(min(1000, count - start))]})


def left(conn: psycopg.Connection) -> int:
    return conn.execute(
        "SELECT count(*) FROM dl_jobs WHERE queue = %s AND status IN ('queued', 'running')", [QUEUE]
    ).fetchone()[0]


def forget_bench_jobs(conn: psycopg.Connection) -> None:
    """Delete the bench's jobs, and vacuum away what they left in the claim's indexes (as the
    worker's housekeeping would: the measuring worker runs none)."""
    conn.execute("DELETE FROM dl_jobs WHERE queue = %s", [QUEUE])
    conn.execute("VACUUM ANALYZE dl_jobs")


def drain_and_pickup(params: dict, prefix: str, *, jobs: int, pickups: int) -> tuple[float, list[float]]:
    env = environment(params, prefix)
    with connect(params, prefix) as conn:
        forget_bench_jobs(conn)
        enqueue(conn, jobs)
        conn.execute("ANALYZE dl_jobs")  # the planner sees the queued jobs, as the worker's statistics task makes sure
        with runworker(env, CONCURRENCY, "--no-reaper") as worker:
            wait_until(lambda: left(conn) == 0, worker, what="the drain", timeout=600, pause=0.2)
            [(rate,)] = conn.execute(
                "SELECT count(*) / extract(epoch FROM max(finished_at) - min(started_at)) FROM dl_jobs WHERE queue = %s",
                [QUEUE],
            ).fetchall()
            forget_bench_jobs(conn)
            waits = []
            for _ in range(pickups):
                enqueue(conn, 1)
                wait_until(lambda: left(conn) == 0, worker, what="a pickup", timeout=30, pause=0.002)
            waits = [
                row[0]
                for row in conn.execute(
                    "SELECT extract(epoch FROM started_at - created_at) * 1000 FROM dl_jobs WHERE queue = %s",
                    [QUEUE],
                )
            ]
        forget_bench_jobs(conn)
    return float(rate), waits


def bench_size(params: dict, big: str, empty: str, args) -> None:
    figures = {big: [], empty: []}
    for _round in range(args.rounds):
        for prefix in (big, empty):
            figures[prefix].append(drain_and_pickup(params, prefix, jobs=args.jobs, pickups=args.pickups))
    print(
        f"1. drain ({args.jobs:,} no-op jobs, runworker --queue {QUEUE}:{CONCURRENCY}) and pickup ({args.pickups} jobs)"
    )
    summary = {}
    for prefix, label in ((big, "seeded big tables"), (empty, "empty database")):
        rates = [rate for rate, _ in figures[prefix]]
        waits = [wait for _, round_waits in figures[prefix] for wait in round_waits]
        summary[prefix] = (statistics.median(rates), quantile(waits, 0.99))
        print(
            f"  {label:18}  drain median {summary[prefix][0]:7,.0f} jobs/s (runs {' | '.join(f'{r:,.0f}' for r in rates)}); "
            f"pickup p50 {statistics.median(waits):.1f} ms, p99 {summary[prefix][1]:.1f} ms"
        )
    drain_ratio = summary[empty][0] / summary[big][0]
    pickup_ratio = summary[big][1] / summary[empty][1]
    print(
        f"  at size / empty: drain {drain_ratio:.2f}x slower, pickup p99 {pickup_ratio:.2f}x; target <= "
        f"{SIZE_RATIO_TARGET}x: {verdict(drain_ratio <= SIZE_RATIO_TARGET and pickup_ratio <= SIZE_RATIO_TARGET)}"
    )


def churn(params: dict, prefix: str, rate: int, stop: threading.Event) -> None:
    """Enqueue ``rate`` jobs/s in tenths of a second until ``stop``."""
    with connect(params, prefix) as conn:
        tick = time.monotonic()
        while not stop.is_set():
            enqueue(conn, rate // 10)
            tick += 0.1
            time.sleep(max(0.0, tick - time.monotonic()))


def queue_waits(conn: psycopg.Connection, since, until) -> list[float]:
    """ms from insert to start of the churning jobs inserted between ``since`` and ``until``."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT extract(epoch FROM started_at - created_at) * 1000 FROM dl_jobs "
            "WHERE queue = %s AND created_at >= %s AND created_at < %s",
            [QUEUE, since, until],
        )
    ]


def now(conn: psycopg.Connection):
    return conn.execute("SELECT now()").fetchone()[0]


def bench_retention(params: dict, prefix: str, args) -> None:
    from jobs.queue.services import maintenance

    env = environment(params, prefix)
    with connect(params, prefix) as conn, runworker(env, CONCURRENCY, "--no-reaper") as worker:
        forget_bench_jobs(conn)
        stop = threading.Event()
        producer = threading.Thread(target=churn, args=(params, prefix, args.churn_rate, stop))
        producer.start()
        try:
            time.sleep(5)  # the worker up, the churn steady
            clean_since = now(conn)
            time.sleep(args.churn_sec)
            pruning_since = now(conn)
            batches, deleted, started = [], 0, time.monotonic()
            while time.monotonic() - started < args.churn_sec:
                batch_started = time.monotonic()
                [(count,)] = conn.execute(
                    maintenance._PRUNE_AGED, {"age": args.age_days * 86400, "batch": maintenance.RETENTION_BATCH}
                ).fetchall()
                batches.append(time.monotonic() - batch_started)
                deleted += count
                if count < maintenance.RETENTION_BATCH:
                    break  # all of the history older than the limit gone
            pruning = time.monotonic() - started
            pruning_until = now(conn)
            identical_started = time.monotonic()
            conn.execute(
                maintenance._PRUNE_IDENTICAL, {"within": 120, "keep": 100, "batch": maintenance.RETENTION_BATCH}
            )
            identical_sec = time.monotonic() - identical_started
        finally:
            stop.set()
            producer.join()
        wait_until(lambda: left(conn) == 0, worker, what="the churn to drain", timeout=120, pause=0.2)
        clean, with_retention = (
            queue_waits(conn, clean_since, pruning_since),
            queue_waits(conn, pruning_since, pruning_until),
        )
        forget_bench_jobs(conn)
    print(
        f"2. retention under churn ({args.churn_rate:,} jobs/s enqueued and run; history older than "
        f"{args.age_days} days deleted, {maintenance.RETENTION_BATCH:,} jobs and their events a statement)"
    )
    print(
        f"  deleted {deleted:,} jobs in {pruning:.0f} s: {deleted / pruning:,.0f} jobs/s against {args.churn_rate:,} "
        f"added: {verdict(deleted / pruning >= args.churn_rate)}"
    )
    print(
        f"  batches {len(batches)}: median {statistics.median(batches) * 1000:.0f} ms, longest "
        f"{max(batches) * 1000:.0f} ms (target <= {LOCK_TARGET_SEC * 1000:.0f} ms: "
        f"{verdict(max(batches) <= LOCK_TARGET_SEC)}); maxIdentical's statement {identical_sec * 1000:.0f} ms"
    )
    print(
        f"  churn queue wait without retention p50 {statistics.median(clean):.1f} ms, p99 {quantile(clean, 0.99):.1f} ms; "
        f"with it p50 {statistics.median(with_retention):.1f} ms, p99 {quantile(with_retention, 0.99):.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=10_000, help="jobs per drain")
    parser.add_argument("--pickups", type=int, default=200, help="jobs enqueued one at a time per round")
    parser.add_argument("--churn-rate", type=int, default=2000, help="jobs/s enqueued while retention runs")
    parser.add_argument("--churn-sec", type=float, default=30, help="seconds without retention, then with it")
    parser.add_argument("--age-days", type=float, default=7, help="retention's age limit")
    parser.add_argument("--no-retention", action="store_true", help="only the drain and pickup")
    args = parser.parse_args()

    params = server_params()
    big = os.environ["BENCH_DB_PREFIX"]
    empty = f"{big}_empty"
    BENCH_DATABASES.update(default=f"{empty}_control", pipeline=f"{empty}_pipeline")
    create_bench_databases(params)
    try:
        bench_size(params, big, empty, args)
    finally:
        with psycopg.connect(**params, autocommit=True) as conn:
            for suffix in ("control", "pipeline"):
                conn.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(f"{empty}_{suffix}"))
                )
    if not args.no_retention:
        bench_retention(params, big, args)


if __name__ == "__main__":
    os.environ.setdefault("BENCH_DB_PREFIX", "big")
    main()
