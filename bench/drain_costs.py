"""Where the time goes, per drained job: this project's runworker beside pgqueuer (procrastinate
on request), on one PostgreSQL server of the bench's own, in the same run.

    .venv/bin/python -m pip install -r bench/requirements-peers.txt     # the peers, once
    .venv/bin/python bench/drain_costs.py                    # 10,000 no-op jobs, concurrency 16, ours and pgqueuer
    .venv/bin/python bench/drain_costs.py --jobs 2000 --systems ours pgqueuer procrastinate --json costs.json

bench/queue_peers.py's systems and drain(): N no-op jobs loaded by each system's bulk enqueue (not
counted), its worker started as a process of its own, the jobs left counted from outside every
10 ms; the systems take turns over --rounds (medians; rows written and top statements from the
last round). The server is a scratch one (bench/fleet.py: fsync off, pg_stat_statements preloaded,
track = all). Counted from right before the worker starts (pg_stat_statements, pg_stat_wal reset)
until it has exited, its database's client backends have gone and its statistics stopped changing
(≤ 3 s; backends flush theirs as they exit), start-up and shut-down included; per job:

    statements     pg_stat_statements calls in the system's database, top-level and nested (functions,
                   triggers, foreign-key checks) apart, less the counter's (its queryid from EXPLAIN
                   VERBOSE); the top-level ones' execution time
    transactions   pg_stat_database xact_commit + xact_rollback there, less the counter's: one
                   autocommit SELECT per sample (checked against its calls); the bench's other readings
                   run in the postgres database or outside the interval
    top statements the 8 with the most execution time (nested ones marked: their time is their
                   caller's too): calls and µs per job, rows per call
    PostgreSQL CPU the postmaster and its live descendants (/proc/<pid>/stat utime + stime) plus the
                   postmaster's cutime + cstime (backends reaped meanwhile), less the bench's two
                   backends (counter, readings); autovacuum, checkpointer in; clock ticks (10 ms)
    worker CPU     the worker and its children: the bench's getrusage(RUSAGE_CHILDREN) (it reaps the
                   worker and no other child meanwhile); voluntary context switches likewise
    read, write    the worker's /proc/<pid>/io syscr, syscw, which the kernel adds to the bench's
                   /proc/self/io when it reaps it (the bench's own threads' subtracted): a round-trip
                   proxy, though recv() and send() are not counted (note 2)
    steady         both CPU figures between the first samples with ≤ 95% and ≤ 5% of the jobs left
                   (/proc then), per job done between: no start-up, no shut-down
    WAL            pg_wal_lsn_diff of pg_current_wal_lsn() at both ends; records, FPIs: pg_stat_wal
    rows written   pg_stat_user_tables n_tup_ins, n_tup_upd (n_tup_hot_upd of them), n_tup_del;
                   index entries ≈ (inserts + non-HOT updates) × indexes (pg_index), a bound if partial
    jobs/s         drain()'s steady state (95% → 5% left), for context
"""

import argparse
import importlib.util
import json
import logging
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path

import psycopg
from common import BENCH_DATABASES, cpu_seconds, create_bench_databases, print_table, proc_stat
from fleet import scratch_server
from psycopg import sql
from queue_peers import SYSTEMS, DrainWatch, Run, System, drain

TOP = 8
SETTLE_SEC = 3.0  # the longest wait for the statistics to stop changing
MARKS = (0.95, 0.05)  # the steady window, share of the jobs left
TICKS = os.sysconf("SC_CLK_TCK")
WIDTH = 14
NOTES = """\
  1. The counter's subtracted; one per connection opened and one each time a listening backend reads
     the notifications sent to it while idle are in, besides the statements'.
  2. A poor proxy for round trips: /proc/<pid>/io counts neither recv() nor send(), libpq's calls on its
     socket, so these are file and pipe I/O (imports, logs, wake-ups); context switches come nearer."""
WRITES = ("ins", "upd", "HOT", "del")  # pg_stat_user_tables n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del
BACKENDS_SQL = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND backend_type = 'client backend'"
XACTS_SQL = "SELECT xact_commit + xact_rollback, sessions FROM pg_stat_database WHERE datname = %s"
WAL_SQL = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn), wal_records, wal_fpi FROM pg_stat_wal"
TABLES_SQL = """
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
       (SELECT count(*) FROM pg_index WHERE indrelid = relid),
       (SELECT count(*) FROM pg_index WHERE indrelid = relid AND indpred IS NOT NULL)
FROM pg_stat_user_tables
"""
STATEMENTS_SQL = """
SELECT queryid, toplevel, calls, total_exec_time, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 90)
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = %s)
"""


def own_cpu(pid: int, *, children: bool = False) -> float:
    """A process's CPU seconds (/proc/<pid>/stat utime + stime), or its reaped children's (cutime + cstime)."""
    fields = proc_stat(pid)
    return sum(int(value) for value in (fields[13:15] if children else fields[11:13])) / TICKS


def tree_cpu(pid: int) -> float:
    """A process's CPU seconds, its live descendants' and those of the children it reaped."""
    return cpu_seconds(pid) + own_cpu(pid, children=True)


def syscalls(path: str) -> tuple[int, int]:
    fields = dict(line.split(": ") for line in Path(path).read_text().splitlines())
    return int(fields["syscr"]), int(fields["syscw"])


def reaped() -> dict[str, float]:
    """CPU seconds, voluntary context switches, read and write calls of the children reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    reads, writes = syscalls("/proc/self/io")  # this process's threads and the children it reaped
    for task in Path("/proc/self/task").iterdir():
        own_reads, own_writes = syscalls(f"{task}/io")
        reads, writes = reads - own_reads, writes - own_writes
    return {
        "worker CPU µs": (usage.ru_utime + usage.ru_stime) * 1e6,
        "worker voluntary ctx switches": usage.ru_nvcsw,
        "worker read() (RT proxy, note 2)": reads,
        "worker write() (RT proxy, note 2)": writes,
    }


def tables(system: System) -> dict[str, tuple]:
    with system.connect() as conn:
        return {name: counts for name, *counts in conn.execute(TABLES_SQL)}


class Meter(DrainWatch):
    """The counters around one drain: right before its worker starts, on the way, after it ended."""

    def __init__(self, system: System, meta: psycopg.Connection, postmaster: int, jobs: int):
        self.system, self.meta, self.postmaster, self.jobs = system, meta, postmaster, jobs
        self.meta_pid = meta.info.backend_pid
        self.samples, self.marks = 0, {}

    def settle(self, backends: int) -> list[int]:
        """The client backends of the system's database, once ``backends`` are left and its
        transaction count has stopped changing (or SETTLE_SEC has passed)."""
        deadline, last = time.monotonic() + SETTLE_SEC, None
        while True:
            self.meta.execute("SELECT pg_stat_clear_snapshot()")
            pids = [pid for (pid,) in self.meta.execute(BACKENDS_SQL, [self.system.database])]
            xacts = self.meta.execute(XACTS_SQL, [self.system.database]).fetchone()[0]
            if len(pids) == backends and xacts == last:
                return pids
            if time.monotonic() > deadline:
                print(f"  ({self.system.name}: {len(pids)} backends, statistics still moving after {SETTLE_SEC} s)")
                return pids
            last = xacts if len(pids) == backends else None
            time.sleep(0.25)

    def server_cpu(self) -> float:
        return tree_cpu(self.postmaster) - self.counter_cpu - own_cpu(self.meta_pid)

    def read(self) -> dict[str, float]:
        self.meta.execute("SELECT pg_stat_clear_snapshot()")
        xacts, sessions = self.meta.execute(XACTS_SQL, [self.system.database]).fetchone()
        cpu = self.server_cpu() * 1e6
        return {"transactions (note 1)": xacts, "connections opened": sessions, "PostgreSQL CPU µs": cpu} | reaped()

    def starting(self) -> None:
        (self.counter,) = self.settle(backends=1)  # drain()'s counter, connected
        self.tables = tables(self.system)
        with self.system.connect() as conn:
            explain = sql.SQL("EXPLAIN (VERBOSE, FORMAT JSON) ") + sql.SQL(self.system.left_sql)
            self.counter_query = conn.execute(explain).fetchone()[0][0]["Query Identifier"]
        self.settle(backends=1)
        self.meta.execute("SELECT pg_stat_statements_reset(), pg_stat_reset_shared('wal')")
        self.lsn = self.meta.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        self.counter_cpu = own_cpu(self.counter)
        self.start = self.read()

    def sampled(self, worker, left: int) -> None:
        self.samples += 1
        self.counter_cpu = own_cpu(self.counter)  # the last one read while it is alive
        for mark in MARKS:
            if left <= mark * self.jobs and mark not in self.marks:
                self.marks[mark] = (left, tree_cpu(worker.pid), self.server_cpu())

    def statements(self) -> list[tuple]:
        """The system's statements in pg_stat_statements, the counter's left out."""
        rows = self.meta.execute(STATEMENTS_SQL, [self.system.database]).fetchall()
        if (calls := sum(row[2] for row in rows if row[0] == self.counter_query)) != self.samples:
            print(f"  ({self.system.name}: the counter's calls {calls} ≠ its samples {self.samples})")
        return [row for row in rows if row[0] != self.counter_query]

    def finish(self, run: Run) -> dict:
        self.settle(backends=0)
        end, statements, n = self.read(), self.statements(), self.jobs
        counts = {
            "statements, top-level": sum(row[2] for row in statements if row[1]),
            "statements, nested": sum(row[2] for row in statements if not row[1]),
            "execution time, top-level µs": sum(row[3] for row in statements if row[1]) * 1e3,
        }
        counts |= {key: end[key] - self.start[key] for key in end}
        counts["transactions (note 1)"] -= self.samples  # the counter's
        wal = self.meta.execute(WAL_SQL, [self.lsn]).fetchone()
        counts |= dict(zip(("WAL bytes", "WAL records", "WAL full-page images"), map(float, wal), strict=True))
        figures = {"jobs/s (steady, context)": run.steady} | {key: value / n for key, value in counts.items()}
        (left95, worker95, server95), (left05, worker05, server05) = self.marks.values()
        done = (left95 - left05) or float("nan")  # jobs done in the steady window
        figures["PostgreSQL CPU µs, steady 95→5%"] = (server05 - server95) * 1e6 / done
        figures["worker CPU µs, steady 95→5%"] = (worker05 - worker95) * 1e6 / done
        top = sorted(statements, key=lambda row: -row[3])[:TOP]
        return {
            "figures": figures,
            "counts": counts | {"counter samples": self.samples},
            "tables": self.written(tables(self.system)),
            "top": [
                {"calls": calls / n, "us": ms * 1e3 / n, "rows/call": rows / calls, "nested": not level, "query": query}
                for _id, level, calls, ms, rows, query in top
            ],
        }

    def written(self, after: dict[str, tuple]) -> dict[str, dict]:
        """Rows written per job into each table written to, and its index entries (estimated)."""
        rows, n = {}, self.jobs
        for name, (*counts, indexes, partial) in after.items():
            ins, upd, hot, deleted = (a - b for a, b in zip(counts, self.tables.get(name, (0,) * 4), strict=False))
            if ins or upd or deleted:
                rows[name] = dict(zip(WRITES, (ins / n, upd / n, hot / n, deleted / n), strict=True))
                rows[name] |= {"indexes": indexes, "partial": partial, "index entries": (ins + upd - hot) * indexes / n}
        return rows


def prepare(params: dict, names: list[str]) -> list[System]:
    """The systems named, installed in their databases on the scratch server."""
    env = create_bench_databases(params)
    systems = [cls(params, env) for cls in SYSTEMS if cls.name in names]
    with psycopg.connect(**params, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION pg_stat_statements")
        for system in systems:
            if system.database not in BENCH_DATABASES.values():
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(system.database)))
    for system in systems:
        system.install()
    return systems


def measure(args) -> tuple[str, dict[str, list[dict]]]:
    with (
        tempfile.TemporaryDirectory(prefix="drain-costs-") as directory,
        scratch_server(Path(directory), statements=True) as (params, _log),
    ):
        postmaster = int((Path(directory) / "data" / "postmaster.pid").read_text().split()[0])
        systems = prepare(params, args.systems)
        results: dict[str, list[dict]] = {system.name: [] for system in systems}
        with psycopg.connect(**params, autocommit=True) as meta:
            version = meta.execute("SHOW server_version").fetchone()[0]
            for _round in range(args.rounds):
                for system in systems:
                    meter = Meter(system, meta, postmaster, args.jobs)
                    run = drain(system, jobs=args.jobs, concurrency=args.concurrency, watch=meter)
                    results[system.name].append(meter.finish(run))
    return version, results


def medians(runs: list[dict]) -> dict[str, float]:
    """Each figure's median over the rounds."""
    return {key: statistics.median(run["figures"][key] for run in runs) for key in runs[0]["figures"]}


def number(value: float) -> str:
    return f"{value:>{WIDTH},.1f}" if abs(value) >= 100 else f"{value:>{WIDTH}.3f}"


def figure_rows(figures: dict[str, dict[str, float]]) -> list[tuple]:
    """One row per figure, a column per system, and ours / pgqueuer when both ran."""
    names, ratio = list(figures), {"ours", "pgqueuer"} <= set(figures)
    rows = [("per drained job", *(f"{name:>{WIDTH}}" for name in names), *(["ours / pgqueuer"] if ratio else []))]
    for key in figures[names[0]]:
        row = [key, *(number(figures[name][key]) for name in names)]
        if ratio:
            theirs = figures["pgqueuer"][key]
            row.append(f"{figures['ours'][key] / theirs:>{WIDTH}.2f}×" if theirs else f"{'-':>{WIDTH}}")
        rows.append(tuple(row))
    return rows


def written_rows(written: dict[str, dict]) -> list[tuple]:
    rows = [("table", *(f"{key:>7}" for key in WRITES), "indexes (partial)  index entries")]
    for table, row in written.items():
        indexes = f"{row['indexes']:7d} ({row['partial']:>2}) {row['index entries']:18.3f}"
        rows.append((table, *(f"{row[key]:7.3f}" for key in WRITES), indexes))
    return rows


def top_rows(top: list[dict]) -> list[tuple]:
    rows = [("calls", f"{'µs':>8}", "rows/call", "query")]
    for s in top:
        query = "[n] " * s["nested"] + s["query"]
        rows.append((f"{s['calls']:5.3f}", f"{s['us']:8.1f}", f"{s['rows/call']:9.2f}", query))
    return rows


def report(args, version: str, results: dict[str, list[dict]]) -> dict:
    figures = {name: medians(runs) for name, runs in results.items()}
    print(f"PostgreSQL {version} (scratch server), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    title = f"{args.jobs:,} queued no-op jobs, concurrency {args.concurrency}, median of {args.rounds} round(s)"
    print_table(f"Where the time goes: {title}, taking turns", figure_rows(figures))
    print(NOTES)
    for name, runs in results.items():
        print_table(
            f"{name}: rows written per job, index entries ≈ (inserts + non-HOT updates) × indexes",
            written_rows(runs[-1]["tables"]),
        )
        print_table(f"{name}: top {TOP} statements by execution time, per job ([n]: nested)", top_rows(runs[-1]["top"]))
    systems = {name: {"median": figures[name], "rounds": runs} for name, runs in results.items()}
    setting = {"jobs": args.jobs, "concurrency": args.concurrency, "rounds": args.rounds, "server": version}
    return setting | {"systems": systems}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--systems", nargs="+", choices=[cls.name for cls in SYSTEMS], default=["ours", "pgqueuer"])
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if not all(importlib.util.find_spec(name) for name in ("pgqueuer", "procrastinate")):
        raise SystemExit("install the peers first: .venv/bin/python -m pip install -r bench/requirements-peers.txt")
    logging.getLogger("procrastinate").setLevel(logging.WARNING)  # it logs every deferred job
    version, results = measure(args)
    figures = report(args, version, results)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
