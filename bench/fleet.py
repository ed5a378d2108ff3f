"""A fleet on one machine: many runworker processes and a 4-worker web server against one
PostgreSQL server with max_connections = 100, through a real PgBouncer in transaction mode.

    .venv/bin/python bench/fleet.py                              # 30 workers × 16, 20,000 jobs, 2 rounds
    .venv/bin/python bench/fleet.py --workers 10 --jobs 5000 --rounds 1

A scratch server is made for the run (initdb with the machine's PostgreSQL binaries,
max_connections = 100, in a temporary directory), its two databases migrated, and PgBouncer
started in front of it (pool_mode = transaction). Every process of the service connects as
deployed behind a pooler: both databases through PgBouncer (DB_BEHIND_POOLER=1), LISTEN
straight to the server (DB_LISTEN_URL).

Each round, in turns:

    pair    2 runworker processes (--queue bench:16 --namespace bench.echo:1): the same machine's
            drain rate with few workers, the yardstick
    fleet   --workers runworker processes with the same flags, all started and registered first

and in both, with the web server (gunicorn, 4 uvicorn workers) up: N no-op jobs are queued in
bulk while 4 client threads make synchronous process calls over HTTP (POST
/api/v1/processes/bench.echo/{id}/call) the whole time. Measured:

    drain         jobs/s between 5% and 95% of the jobs finished (their finished_at)
    every job     each of the N jobs succeeded, none failed or lost (at least once: picks ≥ N)
    connections   server backends sampled every 100 ms (max), split into pooled (PgBouncer's
                  server connections) and direct (LISTEN); PgBouncer's clients waiting (max)
    refusals      "too many clients" / "remaining connection slots" in any log, and HTTP errors
    calls         process-call latency p50 / p99 and calls/s during the drain

Targets, printed beside the figures: no refusal, no job lost, calls answering, and the fleet's
drain ≥ 0.8 × the pair's in the same round.
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from common import PYTHON, ROOT, Background, HttpClient, bench_env, free_port, manage, print_table, stop
from psycopg import sql

from pipeline_project.db.urls import database_url

DATABASES = {"default": "fleet_control", "pipeline": "fleet_pipeline"}
QUEUE = "bench"
SLOTS = 16
MAX_CONNECTIONS = 100
# PgBouncer's server connections per database: about twice the server's cores. More let statements
# run side by side on two cores and wait on each other's locks inside PostgreSQL (measured: 25
# connections drained 3,300 jobs/s, 3 to 6 about 4,400-4,800); clients wait in PgBouncer instead.
POOL_SIZE = 4
# The web server's statements get a pool of their own (a PgBouncer database name of their own for
# the same database), so that a synchronous call does not queue behind the workers' claims.
WEB_POOL_SIZE = 2
WEB_POOLS = {
    f"web_{DATABASES['default']}": (DATABASES["default"], WEB_POOL_SIZE),
    f"web_{DATABASES['pipeline']}": (DATABASES["pipeline"], 1),
}
CALL_CLIENTS = 4
PROCESSES = 50
DRAIN_TARGET = 0.8
REFUSALS = ("too many clients", "remaining connection slots")


def postgres_bin() -> Path:
    """The newest PostgreSQL server installed from Debian's packages (initdb, postgres)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[-3]))
    if not found:
        raise SystemExit("needs a PostgreSQL server installation (Debian's postgresql package)")
    return Path(found[-1]).parent


@contextmanager
def scratch_server(directory: Path, *, statements: bool = False, extra: str = ""):
    """A PostgreSQL server of our own: max_connections = 100, loopback, trust; its log in
    ``directory``; ``extra`` settings (lines of postgresql.conf) besides."""
    data, port = directory / "data", free_port()
    if os.geteuid() == 0:
        shutil.chown(directory, "postgres")
    subprocess.run(
        [*_as_postgres(), postgres_bin() / "initdb", "-D", data, "-U", "postgres", "-A", "trust"],
        check=True,
        capture_output=True,
    )
    settings = f"max_connections = {MAX_CONNECTIONS}\nport = {port}\nlisten_addresses = '127.0.0.1'\n"
    settings += "unix_socket_directories = ''\nfsync = off\nshared_buffers = 256MB\njit = off\n"
    if statements:
        # Every statement counted, and the plan of any that ran over a second written to the log.
        settings += "shared_preload_libraries = 'pg_stat_statements, auto_explain'\npg_stat_statements.track = all\n"
        settings += "auto_explain.log_min_duration = '1s'\nauto_explain.log_nested_statements = on\n"
        settings += "log_lock_waits = on\nlog_autovacuum_min_duration = '1s'\n"
    (data / "postgresql.auto.conf").write_text(settings + extra)
    log = directory / "server.log"
    pg_ctl(directory, "-l", log, "start")
    try:
        yield {"host": "127.0.0.1", "port": port, "user": "postgres", "dbname": "postgres"}, log
    finally:
        pg_ctl(directory, "-m", "fast", "stop", check=False)


def pg_ctl(directory: Path, *args, check: bool = True) -> None:
    """pg_ctl on the scratch server made in ``directory``, waiting until it is done."""
    command = [*_as_postgres(), postgres_bin() / "pg_ctl", "-D", directory / "data", "-w", *args]
    subprocess.run(command, check=check, capture_output=True)


def _as_postgres() -> list[str]:
    """The server refuses to run as root: run its binaries as postgres then."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def environment(server: dict, bouncer_port: int, *, prefix: str = "") -> dict:
    """A service process's environment behind the pooler; ``prefix`` picks the pools of the web server."""
    pooled = {**server, "port": bouncer_port}
    return {
        **os.environ,
        "DATABASE_URL": database_url({**pooled, "dbname": prefix + DATABASES["default"]}),
        "PIPELINE_DATABASE_URL": database_url({**pooled, "dbname": prefix + DATABASES["pipeline"]}),
        "DB_BEHIND_POOLER": "1",
        "DB_LISTEN_URL": database_url({**server, "dbname": DATABASES["default"]}),
        "PROCESSES_HANDLER_MODULES": "bench.process_processors",
        "PYTHONPATH": str(ROOT),
        "LOG_LEVEL": "WARNING",
        "PYTHONWARNINGS": "ignore:No directory at",
    }


def prepare_databases(server: dict) -> None:
    """Both databases created and migrated straight on the server (before the pooler is used)."""
    with psycopg.connect(**server, autocommit=True) as conn:
        for name in DATABASES.values():
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    for alias in DATABASES:
        manage(bench_env(server, DATABASES), "migrate", "--noinput", "--database", alias)


def control(server: dict) -> psycopg.Connection:
    return psycopg.connect(**{**server, "dbname": DATABASES["default"]}, autocommit=True)


@contextmanager
def workers(env: dict, count: int, logs: Path, server: dict):
    """``count`` runworker processes, each serving the queue and one process-call slot; yielded
    once all have registered (so the drain starts with every worker listening)."""
    processes = []
    try:
        for n in range(count):
            log = (logs / f"worker-{n}.log").open("w")
            command = [PYTHON, "manage.py", "runworker", "--queue", f"{QUEUE}:{SLOTS}", "--namespace", "bench.echo:1"]
            processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60 + 3 * count
        with control(server) as conn:
            while conn.execute("SELECT count(*) FROM dl_workers").fetchone()[0] < count:
                if time.monotonic() > deadline or any(p.poll() is not None for p in processes):
                    raise RuntimeError(f"not every worker started: see {logs}")
                time.sleep(0.5)
        yield processes
    finally:
        for process in processes:
            process.send_signal(15)
        for process in processes:
            stop(process)
        with control(server) as conn:
            conn.execute("DELETE FROM dl_workers")


@contextmanager
def web(env: dict, logs: Path, *, code: Path = ROOT, workers: int = 4):
    """The web server as deployed, of the checkout at ``code`` (this one unless told; ``env``'s
    PYTHONPATH names it too); its port."""
    port = free_port()
    log = (logs / "web.log").open("w")
    process = subprocess.Popen(
        [
            str(Path(PYTHON).parent / "gunicorn"),
            "-c",
            "pipeline_project/gunicorn_conf.py",
            "pipeline_project.asgi:application",
        ],
        cwd=code,
        env={**env, "WEB_BIND": f"127.0.0.1:{port}", "WEB_WORKERS": str(workers)},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if HttpClient(port, token="").request("GET", "/health")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError(f"the web server did not start: see {logs / 'web.log'}") from None
                time.sleep(0.2)
        yield port
    finally:
        stop(process)


class Sampler(Background):
    """Server backends every 100 ms: pooled (PgBouncer's) and direct; PgBouncer's waiting clients."""

    def __init__(self, server: dict, bouncer_port: int):
        super().__init__()
        self.server, self.bouncer_port = server, bouncer_port
        self.peak = {"backends": 0, "pooled": 0, "direct": 0, "waiting": 0}

    def _run(self) -> None:
        admin = {**self.server, "port": self.bouncer_port, "dbname": "pgbouncer"}
        with (
            psycopg.connect(**self.server, autocommit=True) as conn,
            psycopg.connect(**admin, autocommit=True, cursor_factory=psycopg.ClientCursor) as console,
        ):
            while not self._stop.wait(0.1):
                backends = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                ).fetchone()[0]
                pooled = len(console.execute("SHOW SERVERS").fetchall())
                pools = console.execute("SHOW POOLS")
                waiting_at = [column.name for column in pools.description].index("cl_waiting")
                waiting = sum(row[waiting_at] for row in pools.fetchall())
                for name, value in (("backends", backends), ("pooled", pooled), ("waiting", waiting)):
                    self.peak[name] = max(self.peak[name], value)
                self.peak["direct"] = max(self.peak["direct"], backends - pooled)


class Callers:
    """CALL_CLIENTS threads making synchronous process calls over HTTP until stopped."""

    def __init__(self, port: int, token: str):
        self.port, self.token = port, token
        self.latencies: list[float] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(CALL_CLIENTS)]

    def __enter__(self):
        self.started = time.perf_counter()
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.seconds = time.perf_counter() - self.started

    def _run(self, n: int) -> None:
        client, call = HttpClient(self.port, self.token), 0
        while not self._stop.is_set():
            call += 1
            started = time.perf_counter()
            try:
                status, body = client.request(
                    "POST", f"/api/v1/processes/bench.echo/echo-{(n * 7919 + call) % PROCESSES}/call", {"args": {}}
                )
            except OSError as exc:
                self.errors.append(type(exc).__name__)
                client = HttpClient(self.port, self.token)
                continue
            if status == 200:
                self.latencies.append((time.perf_counter() - started) * 1000)
            else:
                self.errors.append(f"{status} {body.get('code')}")


def initialize(port: int, token: str) -> None:
    """The processes the callers call, made once (an init needs a worker to run it)."""
    client = HttpClient(port, token)
    for n in range(PROCESSES):
        status, body = client.request("POST", f"/api/v1/processes/bench.echo/echo-{n}/init", {"args": {}})
        if status not in (200, 409):  # 409: made in an earlier round
            raise RuntimeError(f"init answered {status}: {body}")


def enqueue(server: dict, count: int, round_name: str) -> None:
    """``count`` no-op jobs, each with its own lock key, in statements of 1,000 (as bulk triggers)."""
    with control(server) as conn:
        for start in range(0, count, 1000):
            conn.execute(
                """
                INSERT INTO dl_jobs (job_id, queue, task, lock_key)
                SELECT gen_random_uuid(), %(queue)s, 'jobs.noop', %(round)s || '-' || n
                FROM generate_series(%(start)s, %(end)s - 1) AS n
                """,
                {"queue": QUEUE, "round": round_name, "start": start, "end": min(count, start + 1000)},
            )


def drained(server: dict, count: int, round_name: str, timeout: float) -> dict:
    """Wait until the round's jobs all finished; their drain rate and how each ended."""
    deadline = time.monotonic() + timeout
    with control(server) as conn:
        like = f"{round_name}-%"
        while conn.execute(
            "SELECT count(*) FROM dl_jobs WHERE lock_key LIKE %s AND finished_at IS NULL", [like]
        ).fetchone()[0]:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        finished = [
            row[0].timestamp()
            for row in conn.execute(
                "SELECT finished_at FROM dl_jobs WHERE lock_key LIKE %s AND finished_at IS NOT NULL ORDER BY 1", [like]
            )
        ]
        statuses = dict(
            conn.execute(
                "SELECT status::text, count(*) FROM dl_jobs WHERE lock_key LIKE %s GROUP BY 1", [like]
            ).fetchall()
        )
        picks = conn.execute(
            "SELECT count(*) FROM dl_job_events e JOIN dl_jobs j USING (job_id) WHERE j.lock_key LIKE %s AND e.kind = 'picked'",
            [like],
        ).fetchone()[0]
    low, high = finished[int(len(finished) * 0.05)], finished[int(len(finished) * 0.95) - 1]
    return {"rate": 0.9 * count / max(high - low, 1e-6), "statuses": statuses, "picks": picks}


def refusals(*logs: Path) -> int:
    return sum(log.read_text(errors="replace").lower().count(word) for log in logs for word in REFUSALS)


def run_round(
    name: str, count: int, env: dict, server: dict, bouncer, logs: Path, token: str, web_port: int, args
) -> dict:
    round_logs = logs / name
    round_logs.mkdir()
    with workers(env, count, round_logs, server), Sampler(server, bouncer.port) as sampler:
        initialize(web_port, token)
        with Callers(web_port, token) as callers:
            enqueue(server, args.jobs, name)
            result = drained(server, args.jobs, name, timeout=args.jobs / 200 + 60)
    result.update(
        peak=sampler.peak,
        calls=callers.latencies,
        call_errors=callers.errors,
        call_rate=len(callers.latencies) / callers.seconds,
        refusals=refusals(*round_logs.iterdir()),
    )
    return result


def row(label: str, result: dict, jobs: int) -> tuple:
    calls = sorted(result["calls"]) or [float("nan")]
    ok = result["statuses"].get("succeeded", 0) == jobs and result["picks"] >= jobs
    return (
        label,
        f"{result['rate']:>6,.0f} jobs/s",
        f"every job: {'yes' if ok else 'NO ' + str(result['statuses'])}",
        f"backends max {result['peak']['backends']} (pooled {result['peak']['pooled']}, direct {result['peak']['direct']})",
        f"waiting max {result['peak']['waiting']}",
        f"calls {result['call_rate']:,.0f}/s p50 {statistics.median(calls):.1f} ms p99 {calls[int(len(calls) * 0.99)]:.1f} ms",
        f"errors {len(result['call_errors'])}, refusals {result['refusals']}",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=30)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pool-size", type=int, default=POOL_SIZE, help="PgBouncer's server connections per database")
    parser.add_argument(
        "--statements", action="store_true", help="print the statements that took longest (pg_stat_statements)"
    )
    args = parser.parse_args()

    from tests.e2e.pgbouncer import started as pgbouncer_started

    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-")))
        os.chmod(directory, 0o755)
        (directory / "server").mkdir()
        (directory / "bouncer").mkdir()
        (directory / "logs").mkdir()
        server, server_log = stack.enter_context(scratch_server(directory / "server", statements=args.statements))
        prepare_databases(server)
        bouncer = stack.enter_context(
            pgbouncer_started(directory / "bouncer", server=server, pool_size=args.pool_size, pools=WEB_POOLS)
        )
        env = environment(server, bouncer.port)
        token = manage(env, "apitoken", "create", "fleet").strip()
        web_port = stack.enter_context(web(environment(server, bouncer.port, prefix="web_"), directory / "logs"))
        print(
            f"{os.cpu_count()} CPUs; PostgreSQL {postgres_bin().parts[-2]} with max_connections = {MAX_CONNECTIONS}; "
            f"PgBouncer (transaction mode, {args.pool_size} server connections per database for the "
            f"workers, {WEB_POOL_SIZE} for the web server); web: 4 uvicorn workers; "
            f"{args.jobs:,} no-op jobs a round; {CALL_CLIENTS} HTTP callers of bench.echo throughout"
        )
        rows, ratios = [], []
        for number in range(1, args.rounds + 1):
            pair = run_round(f"pair{number}", 2, env, server, bouncer, directory / "logs", token, web_port, args)
            fleet = run_round(
                f"fleet{number}", args.workers, env, server, bouncer, directory / "logs", token, web_port, args
            )
            ratios.append(fleet["rate"] / pair["rate"])
            rows.append(row(f"round {number}: 2 runworkers × {SLOTS}", pair, args.jobs))
            rows.append(row(f"round {number}: {args.workers} runworkers × {SLOTS}", fleet, args.jobs))
        refused = refusals(server_log, directory / "logs" / "web.log")
        print_table("drain and calls, the pair and the fleet in turns", rows)
        print(f"\nfleet / pair drain: {', '.join(f'{ratio:.2f}' for ratio in ratios)} (target ≥ {DRAIN_TARGET})")
        print(f"connection refusals in the server's and the web server's logs: {refused}")
        if args.statements:
            with control(server) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                for calls, total, mean, query in conn.execute(
                    "SELECT calls, total_exec_time + total_plan_time, mean_exec_time, left(regexp_replace(query, '\\s+', ' ', 'g'), 150) "
                    "FROM pg_stat_statements ORDER BY 2 DESC LIMIT 15"
                ):
                    print(f"{calls:>8} {total:>10.0f} ms {mean:>7.2f} ms  {query}")


if __name__ == "__main__":
    main()
