"""Drain speed side by side: this project's runworker, pgqueuer and procrastinate, on one server.

    .venv/bin/python -m pip install -r bench/requirements-peers.txt     # the peers, once
    .venv/bin/python bench/queue_peers.py                   # 10,000 no-op jobs, concurrency 16, 3 rounds
    .venv/bin/python bench/queue_peers.py --jobs 2000 --rounds 1

One measure for all: N no-op jobs are queued with each system's own bulk enqueue (not
timed), then its worker starts as a process of its own, and the jobs left are counted from
outside every 10 ms. Wall: from starting the process to none left (start-up included).
Steady state: jobs/s from the moment 95% were left to the moment 5% were (interpolated
between samples). The systems take turns, round by round, so the VM's drifting speed weighs
on all alike; each system has its own database on the same server, emptied and vacuumed
before each run.

    ours           manage.py runworker --queue bench:16 (claims in batches no larger than its free slots)
    pgqueuer       PgQueuer.run(mode=drain, batch_size=16, max_concurrent_tasks=32, its minimum) (asyncio, psycopg)
    procrastinate  App.run_worker(concurrency=16, wait=False) (asyncio, psycopg)

Target, printed beside the figures: our steady state ≥ 1.3 × pgqueuer's in the same run.
"""

import argparse
import asyncio
import itertools
import logging
import os
import statistics
import subprocess
import time
from dataclasses import dataclass

import psycopg
from common import (
    BENCH_DATABASES,
    BENCH_PREFIX,
    PYTHON,
    ROOT,
    create_bench_databases,
    database_url,
    drop_bench_databases,
    print_table,
    server_params,
    stop,
    use_bench_databases,
)
from jobs_queue import LOAD_QUEUED, QUEUE, control_db
from psycopg import sql

TARGET = 1.3  # ours / pgqueuer, steady state
SAMPLE_SEC = 0.01
BATCH = 1000


@dataclass(frozen=True)
class Run:
    wall: float  # seconds, process start → none left
    steady: float  # jobs/s, 95% → 5% left


class System:
    name: str
    database: str | None = None  # its own database, created and dropped by the bench
    left_sql: str

    def __init__(self, params: dict, env: dict):
        self.params, self.env = params, env

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(**{**self.params, "dbname": self.database}, autocommit=True)

    @property
    def dsn(self) -> str:
        return database_url({**self.params, "dbname": self.database})

    def install(self) -> None: ...

    def load(self, jobs: int) -> None:
        raise NotImplementedError

    def command(self, concurrency: int) -> list[str]:
        raise NotImplementedError


class Ours(System):
    name = "ours"
    database = BENCH_DATABASES["default"]
    left_sql = "SELECT count(*) FROM dl_jobs WHERE status IN ('queued', 'running')"

    def load(self, jobs):
        with self.connect() as conn:
            conn.execute("TRUNCATE dl_jobs, dl_job_events, dl_job_dependencies")
            # Independent jobs, as the peers' are: lock_key is required, so one key each.
            conn.execute(LOAD_QUEUED, {"queue": QUEUE, "count": jobs})
            conn.execute("VACUUM ANALYZE dl_jobs, dl_job_events")

    def command(self, concurrency):
        return [PYTHON, "manage.py", "runworker", "--queue", f"{QUEUE}:{concurrency}"]


class PgQueuer(System):
    name = "pgqueuer"
    database = f"{BENCH_PREFIX}_pgqueuer"
    left_sql = "SELECT count(*) FROM pgqueuer"  # queued and picked jobs; finished ones leave the table

    def install(self):
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        async def install():
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await Queries(PsycopgDriver(conn)).install()

        asyncio.run(install())

    def load(self, jobs):
        from pgqueuer.db import PsycopgDriver
        from pgqueuer.queries import Queries

        async def load():
            async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
                await conn.execute("TRUNCATE pgqueuer, pgqueuer_log")
                queries = Queries(PsycopgDriver(conn))
                for start in range(0, jobs, BATCH):
                    count = min(BATCH, jobs - start)
                    await queries.enqueue(["noop"] * count, [None] * count, [0] * count)
                await conn.execute("VACUUM ANALYZE pgqueuer")

        asyncio.run(load())

    def command(self, concurrency):
        return [PYTHON, "-m", "bench.peers.pgqueuer_app", str(concurrency)]


class Procrastinate(System):
    name = "procrastinate"
    database = f"{BENCH_PREFIX}_procrastinate"
    left_sql = "SELECT count(*) FROM procrastinate_jobs WHERE status IN ('todo', 'doing')"

    def _app(self):
        os.environ["PROCRASTINATE_DSN"] = self.dsn
        from peers.procrastinate_app import app, noop

        return app, noop

    def install(self):
        app, _noop = self._app()

        async def install():
            async with app.open_async():
                await app.schema_manager.apply_schema_async()

        asyncio.run(install())

    def load(self, jobs):
        app, noop = self._app()
        with self.connect() as conn:
            conn.execute("TRUNCATE procrastinate_jobs CASCADE")

        async def load():
            async with app.open_async():
                for start in range(0, jobs, BATCH):
                    await noop.batch_defer_async(*[{} for _ in range(min(BATCH, jobs - start))])

        asyncio.run(load())
        with self.connect() as conn:
            conn.execute("VACUUM ANALYZE procrastinate_jobs")

    def command(self, concurrency):
        # Not ``-m``: procrastinate warns when its App lives in the __main__ module.
        return [
            PYTHON,
            "-c",
            "import sys; from bench.peers.procrastinate_app import drain; drain(int(sys.argv[1]))",
            str(concurrency),
        ]


SYSTEMS = [Ours, PgQueuer, Procrastinate]


class DrainWatch:
    """Hooks into drain() for a bench that measures around it (bench/drain_costs.py); these do nothing."""

    def starting(self) -> None:
        """Right before the worker process starts (the jobs loaded, the counter connected)."""

    def sampled(self, worker: subprocess.Popen, left: int) -> None:
        """After each count of the jobs left (the worker not yet stopped, though it may have exited)."""


def drain(system: System, *, jobs: int, concurrency: int, watch: DrainWatch | None = None) -> Run:
    watch = watch or DrainWatch()
    system.load(jobs)
    env = {**system.env, "PGDSN": system.dsn, "PROCRASTINATE_DSN": system.dsn, "PYTHONPATH": str(ROOT)}
    samples: list[tuple[float, int]] = []
    with system.connect() as counter:
        watch.starting()
        started = time.monotonic()
        worker = subprocess.Popen(system.command(concurrency), cwd=ROOT, env=env)
        try:
            while True:
                left = counter.execute(system.left_sql).fetchone()[0]
                samples.append((time.monotonic() - started, left))
                watch.sampled(worker, left)
                if left == 0:
                    break
                if worker.poll() is not None and worker.returncode != 0:
                    raise RuntimeError(f"{system.name}: the worker exited {worker.returncode} with {left} jobs left")
                if time.monotonic() - started > max(120, jobs / 50):
                    raise RuntimeError(f"{system.name}: {left} jobs left after {time.monotonic() - started:.0f} s")
                time.sleep(SAMPLE_SEC)
        finally:
            stop(worker)
    return Run(wall=samples[-1][0], steady=0.9 * jobs / (_when(samples, 0.05 * jobs) - _when(samples, 0.95 * jobs)))


def _when(samples: list[tuple[float, int]], left: float) -> float:
    """The time ``left`` jobs were left, between the two samples around it."""
    for (t0, left0), (t1, left1) in itertools.pairwise(samples):
        if left0 > left >= left1:
            return t0 + (left0 - left) / (left0 - left1) * (t1 - t0)
    return samples[-1][0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    try:
        import pgqueuer  # noqa: F401
        import procrastinate  # noqa: F401
    except ImportError:
        raise SystemExit(
            "install the peers first: .venv/bin/python -m pip install -r bench/requirements-peers.txt"
        ) from None

    logging.getLogger("procrastinate").setLevel(logging.WARNING)  # it logs every deferred job
    params = server_params()
    env = create_bench_databases(params)
    peers = [system for system in SYSTEMS if system.database != BENCH_DATABASES["default"]]
    with psycopg.connect(**params, autocommit=True) as conn:
        for system in peers:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(system.database)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(system.database)))
    try:
        use_bench_databases()
        systems = [cls(params, env) for cls in SYSTEMS]
        for system in systems:
            system.install()
        with control_db(params) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
        print(f"PostgreSQL {version}, {os.cpu_count()} CPUs, load average at start {os.getloadavg()[0]:.2f}")
        runs: dict[str, list[Run]] = {system.name: [] for system in systems}
        for _round in range(args.rounds):
            for system in systems:
                runs[system.name].append(drain(system, jobs=args.jobs, concurrency=args.concurrency))
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    finally:
        drop_bench_databases(params)
        with psycopg.connect(**params, autocommit=True) as conn:
            for system in peers:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(system.database)))
    steady = {name: statistics.median(run.steady for run in system_runs) for name, system_runs in runs.items()}
    rows = [
        (
            name,
            f"steady median {steady[name]:>7,.0f} jobs/s",
            "runs " + " | ".join(f"{run.steady:,.0f}" for run in system_runs),
            f"wall median {statistics.median(run.wall for run in system_runs):5.2f} s",
            "runs " + " | ".join(f"{run.wall:.2f}" for run in system_runs),
        )
        for name, system_runs in runs.items()
    ]
    ratio = steady["ours"] / steady["pgqueuer"]
    rows.append(("ours / pgqueuer", f"{ratio:.2f}×", f"target ≥ {TARGET}×: {'PASS' if ratio >= TARGET else 'FAIL'}"))
    rows.append(("ours / procrastinate", f"{steady['ours'] / steady['procrastinate']:.2f}×"))
    print_table(
        f"Drain of {args.jobs:,} queued no-op jobs, concurrency {args.concurrency}, {args.rounds} round(s) "
        "taking turns; jobs left counted every 10 ms from outside",
        rows,
    )


if __name__ == "__main__":
    main()
