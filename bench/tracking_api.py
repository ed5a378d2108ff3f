"""Tracking API benchmark: 1,000,000 rows, real HTTP through gunicorn.

Prints p50/p99 latency of GET /queues/{stage} and POST /queues/{stage}/claim, and the
throughput of POST /files/register, measured by a keep-alive client.

    .venv/bin/python bench/tracking_api.py [--rows 1000000] [--requests 2000]

Runs on fresh bench databases on the configured server (embedded PostgreSQL unless
DATABASE_URL is set) and drops them afterwards (--keep leaves them).
"""

import argparse
import threading
import time

from common import (
    HttpClient,
    bench_connection,
    create_bench_databases,
    drop_bench_databases,
    gunicorn,
    manage,
    percentiles,
    print_table,
    server_params,
    timed,
)

SHARDS_PER_FILE = 10
STAGES = ["shard-splitter", "shard-worker", "mysql-sender"]


def load_rows(params: dict, rows: int) -> float:
    """Insert ``rows`` rows: a quarter ready for each stage, a quarter finished."""
    files = rows // SHARDS_PER_FILE
    started = time.perf_counter()
    with bench_connection(params, "pipeline", autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO pipeline_tracking
                (filename, shard, event_ingest_status, shard_splitter_status, shard_worker_status,
                 mysql_sender_status, created_at, updated_at)
            SELECT lpad(f::text, 14, '0'), s,
                   'done',
                   CASE WHEN f %% 4 = 0 THEN 'new' ELSE 'done' END,
                   CASE WHEN f %% 4 IN (0, 1) THEN 'new' ELSE 'done' END,
                   CASE WHEN f %% 4 = 3 THEN 'done' ELSE 'new' END,
                   now() - make_interval(secs => %s - f), now() - make_interval(secs => %s - f)
            FROM generate_series(1, %s) AS f, generate_series(0, %s) AS s
            """,
            [files, files, files, SHARDS_PER_FILE - 1],
        )
        conn.execute("VACUUM ANALYZE pipeline_tracking")
        count = conn.execute("SELECT count(*) FROM pipeline_tracking").fetchone()[0]
    assert count == files * SHARDS_PER_FILE
    return time.perf_counter() - started


def queue_plan(params: dict) -> str:
    with bench_connection(params, "pipeline") as conn:
        plan = conn.execute(
            "EXPLAIN ANALYZE SELECT filename, shard, created_at FROM pipeline_tracking "
            "WHERE shard_splitter_status = 'done' AND shard_worker_status = 'new' "
            "ORDER BY created_at, id LIMIT 100"
        ).fetchall()
    return "\n".join("    " + row[0] for row in plan)


def register_throughput(port: int, token: str, *, threads: int, per_thread: int) -> dict:
    def work(index: int) -> None:
        client = HttpClient(port, token)
        for number in range(per_thread):
            status, _ = client.request(
                "POST",
                "/api/v1/pipeline/files/register",
                {"filename": f"bench-{index}-{number}", "shards": list(range(SHARDS_PER_FILE))},
            )
            assert status == 200, status

    workers = [threading.Thread(target=work, args=(index,)) for index in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    files = threads * per_thread
    return {
        "files_per_s": round(files / elapsed),
        "rows_per_s": round(files * SHARDS_PER_FILE / elapsed),
        "files": files,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=2000, help="requests per latency measurement")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    args = parser.parse_args()

    params = server_params()
    env = create_bench_databases(params)
    try:
        load_seconds = load_rows(params, args.rows)
        print(f"loaded {args.rows:,} tracking rows in {load_seconds:.1f} s")
        print("queue query plan at this size:\n" + queue_plan(params))
        token = manage(env, "apitoken", "create", "bench").strip()

        with gunicorn(env) as port:
            client = HttpClient(port, token)
            results = []
            for stage in STAGES:
                path = f"/api/v1/pipeline/queues/{stage}?limit=100"
                client.request("GET", path)  # warm up
                results.append(
                    (
                        f"GET /queues/{stage}?limit=100",
                        percentiles(timed(lambda path=path: client.request("GET", path), args.requests)),
                    )
                )
            since = "/api/v1/pipeline/queues/shard-worker?limit=100&updated_since=2000-01-01T00:00:00Z"
            results.append(
                (
                    "GET /queues/shard-worker?updated_since=…",
                    percentiles(timed(lambda: client.request("GET", since), args.requests)),
                )
            )
            deep = "/api/v1/pipeline/queues/shard-worker?limit=100&offset=10000"
            results.append(
                (
                    "GET /queues/shard-worker?offset=10000",
                    percentiles(timed(lambda: client.request("GET", deep), args.requests)),
                )
            )
            claim = "/api/v1/pipeline/queues/mysql-sender/claim"
            for limit in (1, 10, 100):
                results.append(
                    (
                        f"POST /queues/mysql-sender/claim limit={limit}",
                        percentiles(
                            timed(lambda limit=limit: client.request("POST", claim, {"limit": limit}), args.requests)
                        ),
                    )
                )
            print_table(
                f"latency over HTTP with {args.rows:,} rows (sequential keep-alive client)",
                [(label, r) for label, r in results],
            )

            register = register_throughput(port, token, threads=8, per_thread=250)
            print_table(
                "register throughput (8 concurrent clients, 10 shards per file)", [("POST /files/register", register)]
            )
    finally:
        if not args.keep:
            drop_bench_databases(params)


if __name__ == "__main__":
    main()
