"""Job shapes: the jobs dashboard, queues page and job lists on jobs of other shapes than
big_tables.py's, each at 50,000 jobs and at --jobs, side by side.

    .venv/bin/python bench/job_shapes.py                           # every shape, 3,000,000 jobs
    .venv/bin/python bench/job_shapes.py --shape recent --jobs 4000000
    .venv/bin/python bench/job_shapes.py --jobs 500000 --rounds 5  # a quick pass

A bench that seeds one shape proves that shape. The shapes (``SHAPES``), each over 20 queues
(q00..q19), 40 tasks and 5,000 lock keys, 2.5 % of the jobs failed with an error, 1 % queued ten
years ahead on queues no worker serves (q16..q19), the rest succeeded, and three journal events
a job (queued, picked, done or failed):

- spread: every queue and task alike, created evenly over 30 days, the failed ones all of one
  queue and one task (q03, task.3): the planner takes queue and status for independent;
- few-queues: q00, q01 and q02 hold 60, 20 and 10 % of the jobs;
- failed-history: q05 holds a tenth of the jobs, 80 % of them failed (the others 0.5 %);
- recent: 90 % of the jobs created in the last hour (at 3.6M, 1,000 jobs/s: the window the
  dashboard charts full).

Seeding drops and recreates ``shapes_control`` and ``shapes_pipeline`` (or BENCH_DB_PREFIX),
migrates them and inserts in bulk statements of 250,000 jobs with the project's triggers on (its
kept counts and throughput follow), then folds and ages the kept counts as a worker's
maintenance would, and VACUUM ANALYZEs. Timing is big_tables.py's: 3 warm-ups, then --rounds
requests, median and p95; pages p95 <= 300 ms, APIs <= 100 ms, within 1.5x of the 50k figure.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

os.environ.setdefault("BENCH_DB_PREFIX", "shapes")
os.environ.setdefault("LOG_LEVEL", "WARNING")

from big_tables import GROWTH_LIMIT, Endpoint, cell, clients, measure, print_rows, served, verdict
from common import (
    PYTHON,
    ROOT,
    bench_connection,
    bench_env,
    create_bench_databases,
    server_params,
    use_bench_databases,
)

SMALL = 50_000
CHUNK = 250_000
LAST_HOUR = 1 / 720  # of the 30 days


@dataclass(frozen=True)
class Shape:
    name: str
    queue: str  # SQL: a done job's queue, of i (the row's number) and h (a hash of it in [0, 1))
    fails: str  # SQL: whether it failed, of i, h and queue
    created: str = "i::float8 / %(n)s"  # SQL: when, as a share of the 30 days (rising with i)


EVEN = "'q' || lpad((i %% 20)::text, 2, '0')"
SHAPES = {
    shape.name: shape
    for shape in (
        Shape("spread", EVEN, "i %% 40 = 3"),
        Shape(
            "few-queues",
            "CASE WHEN h < 0.6 THEN 'q00' WHEN h < 0.8 THEN 'q01' WHEN h < 0.9 THEN 'q02'"
            " ELSE 'q' || lpad((3 + i %% 17)::text, 2, '0') END",
            "i %% 40 = 3",
        ),
        Shape(
            "failed-history",
            "CASE WHEN h < 0.1 THEN 'q05' ELSE " + EVEN + " END",
            "CASE WHEN queue = 'q05' THEN i %% 5 <> 0 ELSE i %% 200 = 3 END",
        ),
        Shape(
            "recent",
            EVEN,
            "i %% 40 = 3",
            f"CASE WHEN i <= 0.1 * %(n)s THEN i / (0.1 * %(n)s) * (1 - {LAST_HOUR})"
            f" ELSE (1 - {LAST_HOUR}) + (i - 0.1 * %(n)s) / (0.9 * %(n)s) * {LAST_HOUR} END",
        ),
    )
}

JOBS = """
INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, status, attempt, error, created_at, available_at,
                     started_at, finished_at)
SELECT format('%%s-%%s-7%%s-8%%s-%%s', substr(t, 1, 8), substr(t, 9, 4), substr(r, 1, 3), substr(r, 4, 3),
              substr(r, 7, 12))::uuid,
       CASE WHEN parked THEN 'q' || (16 + (i / 100) %% 4) ELSE queue END, 'task.' || (i %% 40),
       jsonb_build_object('n', i), 'key-' || (i %% 5000), s::dl_status, CASE WHEN parked THEN 0 ELSE 1 END,
       CASE WHEN s = 'failed' THEN 'ValueError: bad input ' || (i %% 97) END,
       c, CASE WHEN parked THEN now() + interval '10 years' ELSE c END,
       CASE WHEN NOT parked THEN c END, CASE WHEN NOT parked THEN least(c + interval '200 ms', now()) END
FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS i,
     LATERAL (SELECT abs(hashint8(i)) %% 1000000 / 1000000.0 AS h, i %% 100 = 7 AS parked) AS hashed,
     LATERAL (SELECT {queue} AS queue) AS placed,
     LATERAL (SELECT now() - interval '30 days' + ({created}) * interval '30 days' AS c) AS created,
     LATERAL (SELECT lpad(to_hex((extract(epoch FROM c) * 1000)::bigint), 12, '0') AS t, md5(i::text) AS r) AS hex,
     LATERAL (SELECT CASE WHEN parked THEN 'queued' WHEN {fails} THEN 'failed' ELSE 'succeeded' END AS s) AS st
"""
EVENTS = """
INSERT INTO dl_job_events (job_id, queue, ts, kind, payload)
SELECT job_id, queue, created_at + k * interval '50 ms',
       (ARRAY['queued', 'picked', CASE WHEN status = 'failed' THEN 'failed' ELSE 'done' END])[k],
       CASE WHEN k = 3 THEN jsonb_build_object('attempt', 1, 'duration_ms', 150) ELSE jsonb_build_object('attempt', 1) END
FROM dl_jobs, generate_series(1, 3) AS k
WHERE status <> 'queued' OR k = 1
ORDER BY created_at, k
"""

ENDPOINTS = [
    Endpoint("jobs dashboard", "/admin/jobs/job/dashboard/", api=False),
    Endpoint("jobs dashboard, a day", "/admin/jobs/job/dashboard/?window=day", api=False),
    Endpoint("jobs dashboard, a week", "/admin/jobs/job/dashboard/?window=week", api=False),
    Endpoint("queues page", "/admin/jobs/queue/", api=False),
    Endpoint("job list", "/admin/jobs/job/", api=False),
    Endpoint("job list, failed", "/admin/jobs/job/?state=failed", api=False),
    Endpoint("job list, failed in q07", "/admin/jobs/job/?state=failed&queue=q07", api=False),
    Endpoint("job list, waiting", "/admin/jobs/job/?state=waiting", api=False),
    Endpoint("jobs API, failed", "/api/v1/jobs?status=failed", api=True),
    Endpoint("jobs API, failed in q07", "/api/v1/jobs?queue=q07&status=failed", api=True),
    Endpoint("jobs API, failed in q05", "/api/v1/jobs?queue=q05&status=failed", api=True),
    Endpoint("jobs API, failed of task.7", "/api/v1/jobs?task=task.7&status=failed", api=True),
    Endpoint("jobs API, queued in q17", "/api/v1/jobs?queue=q17&status=queued", api=True),
    Endpoint("queues API", "/api/v1/queues", api=True),
    Endpoint("/metrics", "/metrics", api=True),
    Endpoint("/status", "/status", api=True),
]


def seed(params: dict, shape: Shape, jobs: int) -> float:
    """The bench databases made anew with ``jobs`` jobs of ``shape``; the seconds it took."""
    started = time.perf_counter()
    env = create_bench_databases(params)
    insert = JOBS.format(queue=shape.queue, fails=shape.fails, created=shape.created)
    with bench_connection(params, "default", autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for lo in range(1, jobs + 1, CHUNK):
            conn.execute(insert, {"lo": lo, "hi": min(lo + CHUNK - 1, jobs), "n": jobs})
        conn.execute(EVENTS)
    # What a worker's maintenance has done by then: the counts folded, the minutes past two days in hours.
    maintain = "from jobs.queue.services import maintenance as m; m.job_counts_fold(); m.job_throughput_fold(); "
    maintain += "m.job_throughput_age(retention_days=30)"
    subprocess.run([PYTHON, "manage.py", "shell", "-c", maintain], cwd=ROOT, env=env, check=True)
    with bench_connection(params, "default", autocommit=True) as conn:
        # 30 days of minutes coarsened at once leave the throughput rows' table 40 times their size
        # in free space, which a deployment never has: it coarsens ten minutes at a time, into the
        # space the last pass freed. Compacted, it is the size a month at this rate leaves.
        conn.execute("VACUUM FULL dl_job_throughput")
        conn.execute("VACUUM ANALYZE")
        conn.execute("CHECKPOINT")  # the seed's dirty pages written now, not by the checkpointer while timing
    return time.perf_counter() - started


def time_endpoints(rounds: int) -> dict:
    params = server_params()
    use_bench_databases()
    with served(bench_env(params)) as port:
        staff, daemon = clients(port)
        return {
            endpoint.name: {"api": endpoint.api, **measure(daemon if endpoint.api else staff, endpoint, rounds)}
            for endpoint in ENDPOINTS
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--shape", choices=SHAPES, action="append", help="this shape only (repeatable); all by default")
    parser.add_argument("--jobs", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--time-only", type=int, help=argparse.SUPPRESS)  # the timing child: its rounds
    args = parser.parse_args()
    if args.time_only:
        print(json.dumps(time_endpoints(args.time_only)))
        return
    params = server_params()
    for name in args.shape or SHAPES:
        timed = []
        for jobs in (SMALL, args.jobs):
            seconds = seed(params, SHAPES[name], jobs)
            print(f"{name}: {jobs:,} jobs seeded in {seconds:.0f} s", flush=True)
            child = [PYTHON, __file__, "--time-only", str(args.rounds)]
            answer = subprocess.run(child, check=True, capture_output=True, text=True)
            timed.append(json.loads(answer.stdout.splitlines()[-1]))
        small, big = timed
        print(f"\n{name}: {SMALL:,} against {args.jobs:,} jobs (ms)")
        rows = [("endpoint", "50k median / p95", f"{args.jobs:,} median / p95", "p95 ratio", "verdict")]
        for endpoint, figures in big.items():
            ratio = f"{figures['p95'] / small[endpoint]['p95']:.2f}x"
            rows.append((endpoint, cell(small[endpoint]), cell(figures), ratio, verdict(small[endpoint], figures)))
        print_rows(rows)
        print(f"targets: pages p95 <= 300 ms, APIs <= 100 ms, p95 <= {GROWTH_LIMIT}x 50k's\n", flush=True)


if __name__ == "__main__":
    sys.exit(main())
