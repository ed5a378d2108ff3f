"""Faults production brings, at a production rate: the queue driven through each, measured.

    .venv/bin/python bench/chaos.py                          # every scenario, 1,000 jobs/s offered
    .venv/bin/python bench/chaos.py --scenario restart --scenario freeze --rate 500
    .venv/bin/python bench/chaos.py --scenario held-xmin --preload 1000000   # at a year's size
    .venv/bin/python bench/chaos.py --failovers                # a primary replaced by its standby

A PostgreSQL cluster of its own is made for the run (initdb with the machine's PostgreSQL
binaries, max_connections = 100, in a temporary directory), so that restarting, killing and
starving it harms nothing else. For each scenario, on fresh tables (``--preload`` finished jobs
first): two `runworker --queue chaos:16` processes, the web server (gunicorn, as deployed) and a
producer process sending ``--rate`` no-op jobs a second through ``job_enqueue_many``, retrying a
failed call with the same idempotency keys. Then the phases: warm-up (not measured), clean,
fault, recovery; then the producer stops and the workers finish the backlog.

Scenarios (``--fault-sec`` overrides a fault's length):

    restart          the database stopped (fast shutdown) and started again 10 s later
    backend-kills    pg_terminate_backend on a random connection of the service, 5 a second
    connections      another client holds every free connection slot
    worker-kills     one of the two workers SIGKILLed every 10 s and started again
    held-xmin        an idle-in-transaction session holding an XID (vacuum reclaims nothing)
    rr-readers       four REPEATABLE READ transactions scanning dl_jobs and dl_job_events
    overload         1.5 × the rate, then the rate again
    burst            100,000 more jobs within one minute
    listener-kills   the workers' LISTEN connections alone killed every 5 s
    freeze           a worker stopped (SIGSTOP) past its jobs' lease, then continued
    pgbouncer        the service behind PgBouncer (transaction mode), the pooler restarted

and, with ``--failovers`` (or named), on a primary and a streaming standby of their own, the
service given both hosts (see chaos_failover.py):

    failover         the primary stopped hard, the standby promoted (asynchronous replication)
    failover-sync    the same with a synchronous standby
    switchover       planned: the primary stopped cleanly, the standby promoted, the old one its standby
    read-only        the primary fenced read-only under the service, the standby promoted

Measured, from the jobs' own rows and events afterwards (see chaos_report.py): jobs lost and
run more than once, the seconds until the throughput and the pickup latency were back to clean,
pickup p99 per phase, dead rows in dl_jobs at the fault's end, the producer's failed calls, the
web tier's answers (/health, /status, an API read) and the warnings and tracebacks logged.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import chaos_failover
import psycopg
from chaos_report import Phases, WebProbe, print_report, print_timeline, scenario_report
from common import PYTHON, ROOT, bench_env, manage, stop
from fleet import DATABASES, MAX_CONNECTIONS, environment, pg_ctl, postgres_bin, prepare_databases, web
from fleet import scratch_server as fleet_server

QUEUE = "chaos"
WORKER_SLOTS = 16
LEASE_TTL_SEC = 15  # the jobs' lease: a frozen worker's jobs run again after it
RESTART_DOWN_SEC = 10


@dataclass
class Rig:
    """Everything a fault may act on."""

    server: dict
    directory: Path
    env: dict
    logs: Path
    bouncer: object | None = None
    workers: list = field(default_factory=list)
    standby: Path | None = None  # the standby's directory, in the failover scenarios
    control_file: Path | None = None
    rate: float = 0.0
    counters: dict = field(default_factory=dict)

    def start_worker(self, index: int) -> subprocess.Popen:
        log = (self.logs / f"worker-{index}.log").open("a")
        command = [PYTHON, "manage.py", "runworker", "--queue", f"{QUEUE}:{WORKER_SLOTS}"]
        process = subprocess.Popen(command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        if index < len(self.workers):
            self.workers[index] = process
        else:
            self.workers.append(process)
        return process

    def set_rate(self, rate: float) -> None:
        self.control_file.write_text(json.dumps({"rate": rate, "lease_ttl_sec": LEASE_TTL_SEC}))

    def direct(self) -> psycopg.Connection:
        return psycopg.connect(**{**self.server, "dbname": DATABASES["default"]}, autocommit=True)

    def count(self, name: str, by: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + by


# --- the faults: each acts for about ``seconds`` and returns when the fault is over --------------


def restart(rig: Rig, seconds: float) -> None:
    pg_ctl(rig.directory, "-m", "fast", "stop")
    time.sleep(RESTART_DOWN_SEC)
    pg_ctl(rig.directory, "-l", rig.directory / "server.log", "start")


def backend_kills(rig: Rig, seconds: float) -> None:
    end = time.monotonic() + seconds
    with rig.direct() as conn:
        while time.monotonic() < end:
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = ANY(%s) AND backend_type = 'client backend' "
                    "AND pid <> pg_backend_pid() AND application_name <> 'chaos'",
                    [list(DATABASES.values())],
                )
            ]
            if pids:
                conn.execute("SELECT pg_terminate_backend(%s)", [random.choice(pids)])
                rig.count("backends killed")
            time.sleep(0.2)


def connections(rig: Rig, seconds: float) -> None:
    held = []
    try:
        while True:
            try:
                held.append(psycopg.connect(**rig.server, application_name="chaos", connect_timeout=5))
            except psycopg.OperationalError:
                break
        rig.counters["connections held"] = len(held)
        time.sleep(seconds)
    finally:
        for conn in held:
            conn.close()


def worker_kills(rig: Rig, seconds: float) -> None:
    end, turn = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        time.sleep(10)
        index = turn % len(rig.workers)
        rig.workers[index].kill()
        rig.workers[index].wait()
        rig.start_worker(index)
        rig.count("workers killed")
        turn += 1


def held_xmin(rig: Rig, seconds: float) -> None:
    with rig.direct() as conn:
        conn.execute("BEGIN")
        conn.execute("SELECT pg_current_xact_id()")
        time.sleep(seconds)
        conn.execute("ROLLBACK")


def rr_readers(rig: Rig, seconds: float) -> None:
    end = time.monotonic() + seconds

    def read() -> None:
        with rig.direct() as conn:
            conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            while time.monotonic() < end:
                conn.execute("SELECT count(*), max(created_at) FROM dl_jobs").fetchone()
                conn.execute("SELECT count(*), max(ts) FROM dl_job_events").fetchone()
                rig.count("reader scans")
            conn.execute("ROLLBACK")

    threads = [threading.Thread(target=read) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def overload(rig: Rig, seconds: float) -> None:
    rig.set_rate(rig.rate * 1.5)
    time.sleep(seconds)
    rig.set_rate(rig.rate)


def burst(rig: Rig, seconds: float) -> None:
    rig.set_rate(rig.rate + 100_000 / seconds)
    time.sleep(seconds)
    rig.set_rate(rig.rate)


def listener_kills(rig: Rig, seconds: float) -> None:
    end = time.monotonic() + seconds
    with rig.direct() as conn:
        while time.monotonic() < end:
            time.sleep(5)
            # A worker's LISTEN session holds its session lock (jobs.runtime.names.worker_session_key).
            killed = conn.execute(
                """
                SELECT count(pg_terminate_backend(pid)) FROM pg_locks
                WHERE locktype = 'advisory' AND objsubid = 1 AND granted
                  AND ((classid::bigint << 32) | objid::bigint) IN (
                      SELECT ('x' || left(replace(worker_id::text, '-', ''), 16))::bit(64)::bigint FROM dl_workers)
                """
            ).fetchone()[0]
            rig.count("listeners killed", killed)


RUNNING_ON = """
SELECT count(*) FROM dl_jobs j WHERE status = 'running'
  AND (SELECT payload->>'worker' FROM dl_job_events e WHERE e.job_id = j.job_id AND kind = 'picked'
       ORDER BY event_id DESC LIMIT 1) LIKE '%%:' || %s || ':%%'
"""


def freeze(rig: Rig, seconds: float) -> None:
    """SIGSTOP a worker while it runs jobs (tried again until it does), SIGCONT it ``seconds`` later."""
    frozen = rig.workers[0]
    with rig.direct() as conn:
        for _ in range(100):
            frozen.send_signal(signal.SIGSTOP)
            if conn.execute(RUNNING_ON, [str(frozen.pid)]).fetchone()[0]:
                break
            frozen.send_signal(signal.SIGCONT)
            time.sleep(0.05)
        rig.counters["jobs running when frozen"] = conn.execute(RUNNING_ON, [str(frozen.pid)]).fetchone()[0]
    time.sleep(seconds)
    frozen.send_signal(signal.SIGCONT)


def pgbouncer_restart(rig: Rig, seconds: float) -> None:
    rig.bouncer.restart(down_sec=seconds)


@dataclass(frozen=True)
class Scenario:
    name: str
    fault: object
    fault_sec: float
    behind_pooler: bool = False
    replication: str | None = None  # "async" or "sync": on a primary and a standby of its own


SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        Scenario("restart", restart, RESTART_DOWN_SEC),
        Scenario("backend-kills", backend_kills, 60),
        Scenario("connections", connections, 60),
        Scenario("worker-kills", worker_kills, 120),
        Scenario("held-xmin", held_xmin, 300),
        Scenario("rr-readers", rr_readers, 300),
        Scenario("overload", overload, 180),
        Scenario("burst", burst, 60),
        Scenario("listener-kills", listener_kills, 30),
        Scenario("freeze", freeze, LEASE_TTL_SEC + 15),
        Scenario("pgbouncer", pgbouncer_restart, 2, behind_pooler=True),
        Scenario("failover", chaos_failover.failover, 0, replication="async"),
        Scenario("failover-sync", chaos_failover.failover, 0, replication="sync"),
        Scenario("switchover", chaos_failover.switchover, 0, replication="async"),
        Scenario("read-only", chaos_failover.read_only, chaos_failover.READ_ONLY_HELD_SEC, replication="async"),
    )
}


# --- one scenario ---------------------------------------------------------------------------------


def fresh_tables(server: dict, preload: int) -> None:
    """Empty queue tables, then ``preload`` finished jobs with their events, of the last five days
    (younger than retention's seven)."""
    with psycopg.connect(**{**server, "dbname": DATABASES["default"]}, autocommit=True) as conn:
        conn.execute("TRUNCATE dl_jobs, dl_workers CASCADE")
        for start in range(0, preload, 100_000):
            conn.execute(
                """
                WITH made AS (
                    INSERT INTO dl_jobs (job_id, queue, task, args, lock_key, status, attempt, created_at, started_at, finished_at)
                    SELECT gen_random_uuid(), 'chaos-old', 'jobs.noop', jsonb_build_object('n', n), 'old-' || n, 'succeeded', 1,
                           now() - interval '5 days' + n * interval '0.4 seconds',
                           now() - interval '5 days' + n * interval '0.4 seconds',
                           now() - interval '5 days' + n * interval '0.4 seconds'
                    FROM generate_series(%(start)s, %(end)s - 1) AS n RETURNING job_id)
                INSERT INTO dl_job_events (job_id, queue, kind) SELECT job_id, 'chaos-old', kind
                FROM made, unnest(ARRAY['queued', 'picked', 'done']) AS kind
                """,
                {"start": start, "end": min(preload, start + 100_000)},
            )
        conn.execute("VACUUM ANALYZE dl_jobs")
        conn.execute("VACUUM ANALYZE dl_job_events")


@contextmanager
def producing(rig: Rig, tag: str, *, code: Path = ROOT):
    """The producer of the checkout at ``code`` (this one unless told; ``rig.env``'s PYTHONPATH
    names it too) sending while the block runs."""
    status = rig.logs / "producer.json"
    log = (rig.logs / "producer.log").open("w")
    process = subprocess.Popen(
        [PYTHON, "bench/chaos_producer.py", tag, str(rig.control_file), str(status)],
        cwd=code,
        env=rig.env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        yield process
    finally:
        stop(process, timeout=120)
    rig.counters["producer"] = json.loads(status.read_text())


def wait_for_workers(rig: Rig, count: int) -> None:
    deadline = time.monotonic() + 60
    with rig.direct() as conn:
        while conn.execute("SELECT count(*) FROM dl_workers").fetchone()[0] < count:
            if time.monotonic() > deadline or any(worker.poll() is not None for worker in rig.workers):
                raise RuntimeError(f"the workers did not start: see {rig.logs}")
            time.sleep(0.2)


def wait_for_backlog(rig: Rig, offered: int, timeout: float) -> float:
    """Seconds until every offered job finished (or ``timeout``)."""
    started = time.monotonic()
    with rig.direct() as conn:
        while time.monotonic() - started < timeout:
            done = conn.execute(
                "SELECT count(*) FROM dl_jobs WHERE queue = %s AND status IN ('succeeded', 'failed', 'lost')", [QUEUE]
            ).fetchone()[0]
            if done >= offered:
                break
            time.sleep(0.5)
    return time.monotonic() - started


def dead_rows(rig: Rig) -> int:
    with rig.direct() as conn:
        return conn.execute("SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'dl_jobs'").fetchone()[0]


def print_statements(rig: Rig) -> None:
    with rig.direct() as conn:
        for calls, total, mean, longest, query in conn.execute(
            "SELECT calls, total_exec_time, mean_exec_time, max_exec_time, "
            "left(regexp_replace(query, '\\s+', ' ', 'g'), 100) FROM pg_stat_statements ORDER BY 2 DESC LIMIT 12"
        ):
            print(f"    {calls:>8} {total:>9.0f} ms {mean:>8.2f} ms (longest {longest:>8.0f} ms)  {query}")


def run_scenario(scenario: Scenario, base: Rig, args) -> dict:
    with ExitStack() as stack:
        rig = Rig(server=base.server, directory=base.directory, env=base.env, logs=base.logs / scenario.name)
        rig.logs.mkdir()
        if scenario.replication:
            pair = base.logs.parent / scenario.name
            pair.mkdir()
            rig.server, rig.directory, rig.standby = stack.enter_context(
                chaos_failover.replicated_pair(pair, synchronous=scenario.replication == "sync")
            )
            prepare_databases(rig.server)
            rig.env = direct_environment(rig.server)
        return _run_scenario(scenario, rig, base, args)


def _run_scenario(scenario: Scenario, rig: Rig, base: Rig, args) -> dict:
    rig.control_file, rig.rate, rig.bouncer = rig.logs / "control.json", args.rate, base.bouncer
    if scenario.behind_pooler:
        rig.env = environment(base.server, base.bouncer.port)
    rig.set_rate(args.rate)
    fresh_tables(rig.server, args.preload)
    fault_sec = args.fault_sec or scenario.fault_sec
    phases = Phases()
    with ExitStack() as stack:
        port = stack.enter_context(web(rig.env, rig.logs, workers=args.web_workers))
        token = manage(rig.env, "apitoken", "create", f"chaos-{scenario.name}").strip()
        probe = stack.enter_context(WebProbe(port, token))
        for index in range(args.workers):
            rig.start_worker(index)
        try:
            wait_for_workers(rig, args.workers)
            with producing(rig, scenario.name):
                time.sleep(args.warmup_sec)
                if args.statements:
                    with rig.direct() as conn:
                        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                        conn.execute("SELECT pg_stat_statements_reset()")
                phases.mark("clean", rig.logs)
                time.sleep(args.clean_sec)
                phases.mark("fault", rig.logs)
                scenario.fault(rig, fault_sec)
                rig.counters["dead rows at the fault's end"] = dead_rows(rig)
                phases.mark("recovery", rig.logs)
                time.sleep(args.recovery_sec)
                phases.mark("end", rig.logs)
            if args.statements:
                print_statements(rig)
            drain_sec = wait_for_backlog(rig, rig.counters["producer"]["offered"], timeout=600)
        finally:
            for worker in rig.workers:
                worker.send_signal(signal.SIGCONT)  # a frozen one must hear the stop
                stop(worker)
    with rig.direct() as conn:
        report = scenario_report(conn, scenario.name, phases, rig.counters, probe, drain_sec, args.rate)
        if scenario.replication:
            offered = rig.counters["producer"]["offered"]
            report["fault"]["told enqueued, missing"] = chaos_failover.enqueued_then_missing(
                conn, scenario.name, offered
            )
        return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--scenario", action="append", choices=sorted(SCENARIOS), help="default: all but the failovers, in order"
    )
    parser.add_argument("--failovers", action="store_true", help="the failover scenarios (chaos_failover.py), in order")
    parser.add_argument("--rate", type=float, default=1000, help="jobs a second offered (default 1,000)")
    parser.add_argument("--warmup-sec", type=float, default=15)
    parser.add_argument("--clean-sec", type=float, default=15)
    parser.add_argument("--recovery-sec", type=float, default=20)
    parser.add_argument("--fault-sec", type=float, help="every fault's length (default: each scenario's own)")
    parser.add_argument("--preload", type=int, default=0, help="finished jobs in the table before each scenario")
    parser.add_argument("--timeline", action="store_true", help="print each scenario second by second")
    parser.add_argument("--json", type=Path, help="also write the reports here")
    parser.add_argument("--workers", type=int, default=2, help="runworker processes (default 2)")
    parser.add_argument("--web-workers", type=int, default=4, help="the web server's workers (default 4)")
    parser.add_argument(
        "--statements", action="store_true", help="print the statements that took longest in each scenario's phases"
    )
    args = parser.parse_args()
    from tests.e2e.pgbouncer import started as pgbouncer_started

    # A stopped bench (SIGTERM) leaves the way Ctrl-C does: its workers, servers and cluster go with it.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    failovers = [name for name, scenario in SCENARIOS.items() if scenario.replication]
    names = args.scenario or (failovers if args.failovers else [name for name in SCENARIOS if name not in failovers])
    reports = []
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        os.chmod(directory, 0o755)
        for name in ("server", "bouncer", "logs"):
            (directory / name).mkdir()
        server, _log = stack.enter_context(fleet_server(directory / "server", statements=args.statements))
        prepare_databases(server)
        bouncer = None
        if any(SCENARIOS[name].behind_pooler for name in names):
            bouncer = stack.enter_context(pgbouncer_started(directory / "bouncer", server=server))
        base = Rig(
            server=server, directory=directory / "server", env=direct_environment(server), logs=directory / "logs"
        )
        base.bouncer = bouncer
        print(
            f"{os.cpu_count()} CPUs; PostgreSQL {postgres_bin().parts[-2]}, max_connections = {MAX_CONNECTIONS}; "
            f"{args.workers} runworkers × {WORKER_SLOTS}, web workers {args.web_workers}; {args.rate:,.0f} no-op jobs/s offered; lease {LEASE_TTL_SEC} s; "
            f"phases: warm-up {args.warmup_sec:g} s, clean {args.clean_sec:g} s, fault, recovery "
            f"{args.recovery_sec:g} s; {args.preload:,} finished jobs preloaded",
            flush=True,
        )
        for name in names:
            report = run_scenario(SCENARIOS[name], base, args)
            reports.append(report)
            print_report([report], header=len(reports) == 1)
            if args.timeline:
                print_timeline(report)
        print_report(reports, header=True)
        if args.json:
            args.json.write_text(json.dumps(reports, indent=2, default=str))


def direct_environment(server: dict) -> dict:
    """The service's environment straight to the server (no pooler), as `make run` deploys it."""
    return {**bench_env(server, DATABASES), "PYTHONPATH": str(ROOT)}


if __name__ == "__main__":
    main()
