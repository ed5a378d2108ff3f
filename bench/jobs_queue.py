"""Job queue benchmark (the `jobs` app): drain, enqueue, HTTP trigger, start latency, claim.

    .venv/bin/python bench/jobs_queue.py                     # all five, full size
    .venv/bin/python bench/jobs_queue.py --drain --latency   # only the ones named
    .venv/bin/python bench/jobs_queue.py --drain-jobs 2000 --bulk-jobs 10000 --single-jobs 1000 \\
        --http-requests 400 --latency-jobs 100 --claim-sizes 1000 20000 --claims 200   # a quick pass

1. --drain    no-op jobs already queued, one `manage.py runworker` per concurrency, 3 runs each (taking turns);
              jobs/s from the first `picked` event to the last finished_at (start-up excluded),
              CPU per job of the worker and of the rest of the machine, and the share of CPU time
              the hypervisor gave to other VMs meanwhile (Linux /proc; a busy neighbour slows every figure).
              --max-running N: the queue limited to N running (the limited claim's cost; the manual, systems/limits.md).
2. --enqueue  services.job_enqueue_many: bulk batches of 1,000, and one-row inserts from 4
              threads, with the migrated statement-level NOTIFY triggers, the seed's per-row
              trigger (seed 002 section 4) instead, and no trigger.
3. --http     POST /api/v1/jobs/trigger and /trigger/bulk through gunicorn, 8 keep-alive clients.
4. --latency  enqueue (committed) → handler start, with an idle runworker, one job at a time.
5. --claim    services.jobs_claim (limit 1 and 16, rolled back) with 10,000 and 1,000,000 queued jobs,
              each size in its own database, taking turns over 10 rounds.

Targets, printed beside the figures: drain ≥ 4,000 jobs/s; latency p50 ≤ 3 ms and p99 ≤ 20 ms;
claim p50 with 1,000,000 queued jobs within 1.5× of 10,000.

Runs on fresh bench databases on the configured server (embedded PostgreSQL unless
DATABASE_URL is set) and drops them afterwards (--keep leaves them).
"""

import argparse
import os
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
from common import (
    BENCH_DATABASES,
    BENCH_PREFIX,
    PYTHON,
    ROOT,
    HttpClient,
    create_bench_databases,
    database_url,
    drop_bench_databases,
    gunicorn,
    manage,
    percentiles,
    print_table,
    proc_stat,
    server_params,
    stop,
    timed,
    use_bench_databases,
)
from psycopg import sql

QUEUE = "bench"
BATCH = 1000
ENQUEUE_THREADS = 4
HTTP_CLIENTS = 8
LATENCY_CONCURRENCY = 4
WARMUP = 10  # untimed latency jobs / claims first: connections, prepared statements
POLL_SEC = 0.005  # how often the latency benchmark looks whether its job finished

DRAIN_TARGET = 4000  # jobs/s
LATENCY_TARGETS = {"p50_ms": 3, "p99_ms": 20}
CLAIM_RATIO_TARGET = 1.5
CLAIM_LIMITS = (1, 16)
CLAIM_ROUNDS = 10  # the claim benchmark alternates the queue sizes this many times

# Seed 002, section 4: the per-row NOTIFY function and triggers, from the tests' verbatim copy of the seed DDL.
_SEED_DDL = (ROOT / "tests" / "jobs" / "queue" / "seed_002_ddl.sql").read_text()
SEED_ROW_TRIGGERS = _SEED_DDL[_SEED_DDL.index("CREATE OR REPLACE FUNCTION notify_job_ready") :]
DROP_SEED_ROW_TRIGGERS = """
DROP TRIGGER dl_jobs_notify_ins ON dl_jobs;
DROP TRIGGER dl_jobs_notify_upd ON dl_jobs;
DROP FUNCTION notify_job_ready();
"""
TRIGGER_VARIANTS = {
    "statement": "statement-level (migrated)",
    "row": "per-row (seed 002 section 4)",
    "none": "no NOTIFY trigger",
}

# ``count`` queued jobs, oldest first: UUIDv7-shaped ids in created_at order, one lock_key each.
LOAD_QUEUED = """
INSERT INTO dl_jobs (job_id, queue, task, lock_key, created_at, available_at)
SELECT (lpad(to_hex((extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7000' || '8000'
        || lpad(to_hex(n), 12, '0'))::uuid,
       %(queue)s::text, 'jobs.noop', %(queue)s::text || '-' || n, at, at
FROM generate_series(1, %(count)s::int) AS n,
     LATERAL (SELECT now() - (%(count)s::int - n) * interval '1 millisecond' AS at) AS t
"""


# --- plumbing ---------------------------------------------------------------------------


def control_db(params: dict, dbname: str = BENCH_DATABASES["default"]):
    """An autocommit connection to a jobs database (the bench's own unless named)."""
    return psycopg.connect(**{**params, "dbname": dbname}, autocommit=True)


def reset_jobs(params: dict, dbname: str = BENCH_DATABASES["default"]) -> None:
    with control_db(params, dbname) as conn:
        conn.execute("TRUNCATE dl_jobs, dl_job_events, dl_job_dependencies")


def limit_queue(params: dict, max_running: int | None) -> None:
    """The bench queue limited to ``max_running`` running jobs (None: no limits, as by default)."""
    with control_db(params) as conn:
        conn.execute("DELETE FROM dl_queues WHERE name = %s", [QUEUE])
        if max_running is not None:
            conn.execute(
                "INSERT INTO dl_queues (name, paused, max_running, changed_by) VALUES (%s, false, %s, 'bench')",
                [QUEUE, max_running],
            )


def vacuum_analyze(params: dict, dbname: str = BENCH_DATABASES["default"]) -> None:
    with control_db(params, dbname) as conn:
        conn.execute("VACUUM ANALYZE dl_jobs, dl_job_events")


def count_jobs(params: dict, status: str) -> int:
    with control_db(params) as conn:
        return conn.execute("SELECT count(*) FROM dl_jobs WHERE status = %s::dl_status", [status]).fetchone()[0]


def job_specs(start: int, count: int, *, task: str = "jobs.noop") -> list:
    from jobs.queue.services import JobSpec

    return [JobSpec(queue=QUEUE, task=task, lock_key=f"{QUEUE}-{number}") for number in range(start, start + count)]


def run_threads(count: int, work) -> float:
    """Run ``work(index)`` on ``count`` threads at once; return the wall-clock seconds."""
    with ThreadPoolExecutor(count) as pool:
        started = time.perf_counter()
        list(pool.map(work, range(count)))  # re-raises a thread's exception
        return time.perf_counter() - started


@contextmanager
def runworker(env: dict, concurrency: int, *options: str):
    """A `manage.py runworker` process on QUEUE; stopped with SIGTERM, after which it must exit 0."""
    process = subprocess.Popen(
        [PYTHON, "manage.py", "runworker", "--queue", f"{QUEUE}:{concurrency}", *options], cwd=ROOT, env=env
    )
    try:
        yield process
    finally:
        returncode = stop(process)
    if returncode != 0:
        raise RuntimeError(f"runworker exited {returncode} after SIGTERM")


def wait_until(condition, process: subprocess.Popen, *, what: str, timeout: float, pause: float) -> None:
    """Sleep ``pause`` between calls until ``condition()``; fail if the worker dies or time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        time.sleep(pause)
        if condition():
            return
        if process.poll() is not None:
            raise RuntimeError(f"runworker exited {process.returncode} while waiting for {what}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")


def enqueue_in_batches(count: int, batch: int) -> float:
    """Enqueue ``count`` no-op jobs, ``batch`` per job_enqueue_many call; return the seconds."""
    from jobs.queue import services

    started = time.perf_counter()
    for start in range(0, count, batch):
        services.job_enqueue_many(specs=job_specs(start, min(batch, count - start)))
    return time.perf_counter() - started


def quantile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


# --- 1. drain -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuClock:
    """CPU seconds so far: used by one process, by the whole machine, and stolen by the hypervisor (Linux /proc)."""

    process: float
    machine: float
    stolen: float
    wall: float

    @classmethod
    def read(cls, pid: int) -> "CpuClock":
        ticks = os.sysconf("SC_CLK_TCK")
        fields = proc_stat(pid)
        process = int(fields[11]) + int(fields[12])  # utime + stime
        cpu = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        user, nice, system, _idle, _iowait, irq, softirq, steal = cpu[:8]
        machine = user + nice + system + irq + softirq
        return cls(process=process / ticks, machine=machine / ticks, stolen=steal / ticks, wall=time.monotonic())


@dataclass(frozen=True)
class Drain:
    jobs_per_sec: float
    worker_cpu_us: float  # per job, the runworker process
    other_cpu_us: float  # per job, the rest of the machine: PostgreSQL, mostly
    stolen_share: float  # of the wall-clock CPU time, taken by the hypervisor for other VMs


def drain_rate(params: dict, env: dict, *, concurrency: int, jobs: int, max_running: int | None = None) -> Drain:
    """Fresh queue of ``jobs`` no-op jobs, one worker until all succeeded: jobs/s and CPU per job.

    CPU is counted from the first succeeded job on (start-up excluded) to the end.
    """
    reset_jobs(params)
    limit_queue(params, max_running)
    enqueue_in_batches(jobs, BATCH)
    vacuum_analyze(params)
    with control_db(params) as conn, runworker(env, concurrency) as worker:

        def count(statuses: tuple[str, ...]) -> int:
            return conn.execute(
                "SELECT count(*) FROM dl_jobs WHERE status = ANY (%s::dl_status[])", [list(statuses)]
            ).fetchone()[0]

        wait_until(lambda: count(("succeeded",)) > 0, worker, what="the first job", timeout=60, pause=0.02)
        start, done_at_start = CpuClock.read(worker.pid), count(("succeeded",))
        wait_until(
            lambda: count(("queued", "running")) == 0,
            worker,
            what="the queue to drain",
            timeout=max(60, jobs / 100),
            pause=0.2,
        )
        end = CpuClock.read(worker.pid)
        first_picked, last_finished, succeeded = conn.execute(
            "SELECT (SELECT min(ts) FROM dl_job_events WHERE kind = 'picked'), (SELECT max(finished_at) FROM dl_jobs), "
            "(SELECT count(*) FROM dl_jobs WHERE status = 'succeeded')"
        ).fetchone()
    assert succeeded == jobs, f"{succeeded} of {jobs} jobs succeeded"
    measured = jobs - done_at_start
    worker_cpu = end.process - start.process
    return Drain(
        jobs_per_sec=jobs / (last_finished - first_picked).total_seconds(),
        worker_cpu_us=worker_cpu / measured * 1e6,
        other_cpu_us=(end.machine - start.machine - worker_cpu) / measured * 1e6,
        stolen_share=(end.stolen - start.stolen) / ((end.wall - start.wall) * os.cpu_count()),
    )


def bench_drain(params: dict, env: dict, args) -> None:
    # The concurrencies take turns, run by run, so that the VM's drifting speed weighs on each alike.
    drains = {concurrency: [] for concurrency in args.concurrency}
    for _run in range(args.drain_runs):
        for concurrency, runs in drains.items():
            runs.append(
                drain_rate(params, env, concurrency=concurrency, jobs=args.drain_jobs, max_running=args.max_running)
            )
    rows = []
    for concurrency, runs in drains.items():
        median = statistics.median(run.jobs_per_sec for run in runs)
        worker_cpu = statistics.median(run.worker_cpu_us for run in runs)
        other_cpu = statistics.median(run.other_cpu_us for run in runs)
        stolen = max(run.stolen_share for run in runs)
        rows.append(
            (
                f"runworker --queue {QUEUE}:{concurrency}",
                f"median {median:>7,.0f} jobs/s",
                "runs " + " | ".join(f"{run.jobs_per_sec:,.0f}" for run in runs),
                f"target ≥ {DRAIN_TARGET:,}: {verdict(median >= DRAIN_TARGET)}",
                f"CPU per job: worker {worker_cpu:,.0f} µs + rest of machine {other_cpu:,.0f} µs "
                f"({os.cpu_count()}-core ceiling {os.cpu_count() / (worker_cpu + other_cpu) * 1e6:,.0f} jobs/s); "
                f"CPU stolen by the hypervisor: up to {stolen:.0%}",
            )
        )
    print_table(
        f"1. drain: {args.drain_jobs:,} queued jobs.noop (unique lock_keys), one worker process, first `picked` → "
        "last finished_at; each run on fresh data, worker stopped by SIGTERM and exited 0"
        + (f"; the queue limited to {args.max_running} running (Queue limits)" if args.max_running else ""),
        rows,
    )


# --- 2. enqueue ------------------------------------------------------------------------


@contextmanager
def notify_trigger(params: dict, variant: str):
    """dl_jobs with the migrated statement-level triggers, the seed's per-row ones instead, or none."""
    with control_db(params) as conn:
        ours = [
            name
            for (name,) in conn.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'dl_jobs'::regclass AND NOT tgisinternal "
                "AND tgtype & 1 = 0 ORDER BY tgname"  # bit 0 of tgtype: FOR EACH ROW
            )
        ]
        assert len(ours) == 2, f"expected the two migrated statement-level triggers, found {ours}"
        toggled = ours if variant != "statement" else []
        for name in toggled:
            conn.execute(sql.SQL("ALTER TABLE dl_jobs DISABLE TRIGGER {}").format(sql.Identifier(name)))
        if variant == "row":
            conn.execute(SEED_ROW_TRIGGERS)
        try:
            yield
        finally:
            if variant == "row":
                conn.execute(DROP_SEED_ROW_TRIGGERS)
            for name in toggled:
                conn.execute(sql.SQL("ALTER TABLE dl_jobs ENABLE TRIGGER {}").format(sql.Identifier(name)))


def enqueue_single_rows(threads: int, per_thread: int) -> float:
    """One-row job_enqueue_many calls (a committed transaction each) from ``threads`` connections."""
    from django.db import connection

    from jobs.queue import services

    def work(index: int) -> None:
        try:
            for number in range(index * per_thread, (index + 1) * per_thread):
                services.job_enqueue_many(specs=job_specs(number, 1))
        finally:
            connection.close()

    return run_threads(threads, work)


def enqueue_rates(params: dict, *, bulk_jobs: int, single_jobs: int) -> tuple[float, float]:
    """(bulk jobs/s, single-row jobs/s), each on an empty dl_jobs."""
    per_thread = single_jobs // ENQUEUE_THREADS
    reset_jobs(params)
    bulk = bulk_jobs / enqueue_in_batches(bulk_jobs, BATCH)
    assert count_jobs(params, "queued") == bulk_jobs
    reset_jobs(params)
    single = per_thread * ENQUEUE_THREADS / enqueue_single_rows(ENQUEUE_THREADS, per_thread)
    assert count_jobs(params, "queued") == per_thread * ENQUEUE_THREADS
    return bulk, single


def bench_enqueue(params: dict, env: dict, args) -> None:
    runs = {variant: [] for variant in TRIGGER_VARIANTS}
    for _round in range(args.enqueue_runs):  # variants interleaved, so drift hits them alike
        for variant, variant_runs in runs.items():
            with notify_trigger(params, variant):
                variant_runs.append(enqueue_rates(params, bulk_jobs=args.bulk_jobs, single_jobs=args.single_jobs))

    def cell(variant: str, kind: int) -> str:
        """The median rate of one variant (kind 0: bulk, 1: single-row), its ratio and range."""
        rates = [run[kind] for run in runs[variant]]
        median = statistics.median(rates)
        ratio = median / statistics.median(run[kind] for run in runs["statement"])
        return f"{median:>7,.0f} jobs/s {ratio:4.2f}× ({min(rates):,.0f}–{max(rates):,.0f})"

    per_thread = args.single_jobs // ENQUEUE_THREADS
    print_table(
        f"2. enqueue with services.job_enqueue_many, by NOTIFY trigger on dl_jobs: median of {args.enqueue_runs} "
        f"interleaved runs, × = rate / statement-level, (range)\n"
        f"   bulk: {args.bulk_jobs:,} jobs in batches of {BATCH:,}; "
        f"single-row: {ENQUEUE_THREADS} threads × {per_thread:,} one-job calls, each its own transaction",
        [("trigger", f"{'bulk':>10}".ljust(40), f"{'single-row':>10}")]
        + [(label, cell(variant, 0).ljust(40), cell(variant, 1)) for variant, label in TRIGGER_VARIANTS.items()],
    )


# --- 3. HTTP ------------------------------------------------------------------------------


def trigger_rate(port: int, token: str, *, requests_per_client: int, jobs_per_request: int) -> float:
    """Jobs/s through POST /jobs/trigger (one job a request) or /jobs/trigger/bulk, 8 clients at once."""

    def work(index: int) -> None:
        client = HttpClient(port, token)
        for number in range(requests_per_client):
            jobs = [
                {"queue": QUEUE, "task": "jobs.noop", "lock_key": f"http-{index}-{number}-{item}"}
                for item in range(jobs_per_request)
            ]
            if jobs_per_request == 1:
                status, _ = client.request("POST", "/api/v1/jobs/trigger", jobs[0])
            else:
                status, _ = client.request("POST", "/api/v1/jobs/trigger/bulk", {"jobs": jobs})
            assert status == 201, status

    return HTTP_CLIENTS * requests_per_client * jobs_per_request / run_threads(HTTP_CLIENTS, work)


def bench_http(params: dict, env: dict, args) -> None:
    reset_jobs(params)
    token = manage(env, "apitoken", "create", "bench").strip()
    per_client = args.http_requests // HTTP_CLIENTS
    bulk_per_client = args.http_bulk_requests // HTTP_CLIENTS
    with gunicorn(env) as port:
        single = trigger_rate(port, token, requests_per_client=per_client, jobs_per_request=1)
        bulk = trigger_rate(port, token, requests_per_client=bulk_per_client, jobs_per_request=args.bulk_size)
    expected = HTTP_CLIENTS * (per_client + bulk_per_client * args.bulk_size)
    assert count_jobs(params, "queued") == expected
    print_table(
        f"3. HTTP trigger through gunicorn (2 uvicorn workers, ASGI), {HTTP_CLIENTS} concurrent keep-alive clients",
        [
            ("POST /api/v1/jobs/trigger", f"{single:>7,.0f} triggers/s", f"({HTTP_CLIENTS * per_client:,} requests)"),
            (
                f"POST /api/v1/jobs/trigger/bulk ({args.bulk_size} jobs per request)",
                f"{bulk:>7,.0f} jobs/s",
                f"({HTTP_CLIENTS * bulk_per_client:,} requests, {HTTP_CLIENTS * bulk_per_client * args.bulk_size:,} jobs)",
            ),
        ],
    )


# --- 4. enqueue → start latency -----------------------------------------------------------


def start_latencies(params: dict, env: dict, jobs: int) -> list[float]:
    """Enqueue one job at a time to an idle worker; ms from the producer's commit to the handler's start."""
    from jobs.queue import selectors, services
    from jobs.queue.states import FINISHED

    committed = {}
    with (
        control_db(params) as conn,
        runworker(env, LATENCY_CONCURRENCY, "--handlers", "bench.latency_handlers") as worker,
    ):
        pid = worker.pid
        wait_until(
            lambda: conn.execute("SELECT 1 FROM dl_workers WHERE pid = %s", [pid]).fetchone() is not None,
            worker,
            what="the worker to listen",
            timeout=60,
            pause=0.1,
        )
        for spec in job_specs(0, WARMUP + jobs, task="bench.stamp"):
            job_id = services.job_enqueue(spec=spec).job_id  # committed on return
            committed[job_id] = time.time()

            def finished(job_id=job_id) -> bool:
                status = selectors.job_status(job_id=job_id)
                assert status == "succeeded" or status not in FINISHED, f"job {job_id} {status}"
                return status == "succeeded"

            wait_until(finished, worker, what=f"job {job_id}", timeout=30, pause=POLL_SEC)
        started = dict(
            conn.execute(
                "SELECT job_id, (payload -> 'result' ->> 'started')::float8 FROM dl_job_events WHERE kind = 'done'"
            ).fetchall()
        )
    measured = list(committed.items())[WARMUP:]
    return [(started[job_id] - at) * 1000 for job_id, at in measured]


def bench_latency(params: dict, env: dict, args) -> None:
    reset_jobs(params)
    latencies = start_latencies(params, env, args.latency_jobs)
    figures = {"p50_ms": statistics.median(latencies), "p95_ms": quantile(latencies, 0.95)}
    figures |= {"p99_ms": quantile(latencies, 0.99), "max_ms": max(latencies)}
    rows = []
    for name, value in figures.items():
        target = LATENCY_TARGETS.get(name)
        row = (name[:-3], f"{value:7.2f} ms")
        rows.append((*row, f"target ≤ {target} ms: {verdict(value <= target)}") if target else row)
    print_table(
        f"4. enqueue → start latency: {len(latencies):,} jobs one at a time (after {WARMUP} warm-up jobs), idle "
        f"runworker --queue {QUEUE}:{LATENCY_CONCURRENCY}; handler's time.time() − time.time() after the commit",
        rows,
    )


# --- 5. claim -----------------------------------------------------------------------------


def load_queued(params: dict, count: int, *, dbname: str) -> float:
    """``count`` queued jobs with one INSERT … SELECT, then VACUUM ANALYZE; return the seconds."""
    reset_jobs(params, dbname)
    started = time.perf_counter()
    with control_db(params, dbname) as conn:
        conn.execute(LOAD_QUEUED, {"queue": QUEUE, "count": count})
    vacuum_analyze(params, dbname)
    return time.perf_counter() - started


@contextmanager
def claim_database(params: dict, env: dict):
    """A second migrated jobs database, so that both queue sizes stay loaded at once."""
    name = f"{BENCH_PREFIX}_claim_large"
    create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(create)
    try:
        manage({**env, "DATABASE_URL": database_url({**params, "dbname": name})}, "migrate", "--noinput")
        yield name
    finally:
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(drop)


def use_jobs_database(name: str) -> None:
    """Point this process's default alias at ``name``, on the worker's session settings."""
    from django.db import connections

    from jobs.runtime.database import configure_session

    connections["default"].close()
    connections.settings["default"]["NAME"] = name
    configure_session("off")  # synchronous_commit off, plan_cache_mode force_generic_plan, jit off


def claim_durations(limit: int, count: int) -> list[float]:
    """Time ``count`` claims of ``limit`` jobs, each in a transaction that is rolled back."""
    from django.db import transaction

    from jobs.queue import services

    def claim_and_roll_back() -> None:
        with transaction.atomic():
            jobs = services.jobs_claim(queue=QUEUE, limit=limit, worker_id="bench")
            assert len(jobs) == limit, f"claimed {len(jobs)} of {limit}"
            transaction.set_rollback(True)

    timed(claim_and_roll_back, WARMUP)
    return timed(claim_and_roll_back, count)


def bench_claim(params: dict, env: dict, args) -> None:
    small, large = args.claim_sizes
    with claim_database(params, env) as large_db:
        databases = {small: BENCH_DATABASES["default"], large: large_db}
        for size, dbname in databases.items():
            seconds = load_queued(params, size, dbname=dbname)
            print(f"loaded {size:,} queued jobs in {seconds:.1f} s")
        # The two sizes take turns, a slice of the claims each round, so that the VM's drifting
        # speed weighs on both alike.
        durations = {(size, limit): [] for size in databases for limit in CLAIM_LIMITS}
        for _round in range(CLAIM_ROUNDS):
            for size, dbname in databases.items():
                use_jobs_database(dbname)
                for limit in CLAIM_LIMITS:
                    durations[size, limit] += claim_durations(limit, max(1, args.claims // CLAIM_ROUNDS))
        use_jobs_database(BENCH_DATABASES["default"])
    assert count_jobs(params, "queued") == small  # every claim was rolled back
    figures = {key: percentiles(values) for key, values in durations.items()}
    rows = [("", f"{small:>9,} queued", f"{large:>9,} queued", "ratio p50 | p99")]
    for limit in CLAIM_LIMITS:
        low, high = figures[small, limit], figures[large, limit]
        ratio = high["p50_ms"] / low["p50_ms"]
        rows.append(
            (
                f"jobs_claim(limit={limit})",
                f"p50 {low['p50_ms']:5.2f} p99 {low['p99_ms']:5.2f} ms",
                f"p50 {high['p50_ms']:5.2f} p99 {high['p99_ms']:5.2f} ms",
                f"{ratio:5.2f}× | {high['p99_ms'] / low['p99_ms']:4.2f}×",
                f"target p50 ≤ {CLAIM_RATIO_TARGET}×: {verdict(ratio <= CLAIM_RATIO_TARGET)}",
            )
        )
    print_table(
        f"5. claim: services.jobs_claim, {figures[small, 1]['n']:,} times per limit and size in a rolled-back "
        f"transaction, on the worker's session settings; the sizes alternate over {CLAIM_ROUNDS} rounds",
        rows,
    )


# --- main ---------------------------------------------------------------------------------

BENCHMARKS = {
    "drain": bench_drain,
    "enqueue": bench_enqueue,
    "http": bench_http,
    "latency": bench_latency,
    "claim": bench_claim,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for name in BENCHMARKS:
        parser.add_argument(f"--{name}", action="store_true", help=f"run the {name} benchmark (default: all)")
    parser.add_argument("--drain-jobs", type=int, default=10_000)
    parser.add_argument("--drain-runs", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[4, 16], help="runworker concurrency per drain")
    parser.add_argument("--max-running", type=int, help="drain a queue limited to this many running (default: none)")
    parser.add_argument("--bulk-jobs", type=int, default=100_000, help="jobs per bulk enqueue measurement")
    parser.add_argument("--enqueue-runs", type=int, default=3, help="rounds over the three trigger variants")
    parser.add_argument(
        "--single-jobs", type=int, default=10_000, help=f"one-row enqueues, over {ENQUEUE_THREADS} threads"
    )
    parser.add_argument("--http-requests", type=int, default=2000, help="POST /jobs/trigger requests")
    parser.add_argument("--http-bulk-requests", type=int, default=200, help="POST /jobs/trigger/bulk requests")
    parser.add_argument("--bulk-size", type=int, default=100, help="jobs per bulk trigger request")
    parser.add_argument("--latency-jobs", type=int, default=1000)
    parser.add_argument("--claim-sizes", type=int, nargs=2, default=[10_000, 1_000_000], metavar=("SMALL", "LARGE"))
    parser.add_argument("--claims", type=int, default=1000, help="claims timed per limit and size")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases")
    args = parser.parse_args()
    selected = [name for name in BENCHMARKS if getattr(args, name)] or list(BENCHMARKS)

    params = server_params()
    env = create_bench_databases(params)
    try:
        use_bench_databases()
        with control_db(params) as conn:
            version, jit = conn.execute(
                "SELECT current_setting('server_version'), pg_jit_available() AND current_setting('jit')::bool"
            ).fetchone()
        print(
            f"PostgreSQL {version} at {params.get('host')}:{params.get('port', 5432)}, "
            f"server JIT {'on' if jit else 'off'} (the project's connections turn it off), {os.cpu_count()} CPUs"
        )
        for name in selected:
            BENCHMARKS[name](params, env, args)
    finally:
        if not args.keep:
            drop_bench_databases(params)


if __name__ == "__main__":
    main()
