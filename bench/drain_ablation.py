"""What each of our per-job writes costs the drain: the same drain with one of them switched off,
beside the drain as shipped and pgqueuer's, in the same run, on one scratch server.

    .venv/bin/python -m pip install -r bench/requirements-peers.txt     # pgqueuer, once
    .venv/bin/python bench/drain_ablation.py                 # 10,000 no-op jobs, concurrency 16, 3 rounds
    .venv/bin/python bench/drain_ablation.py --concurrency 4 --variants shipped no-journal

bench/queue_peers.py's drain() (N no-op jobs queued, the worker started, the jobs left counted from
outside every 10 ms, steady state 95% → 5% left) for each variant and for pgqueuer, taking turns
round by round; medians. Each variant is a copy of the migrated database (CREATE DATABASE ...
TEMPLATE) with one change of schema, which the worker, started on it, does not know about:

    shipped            nothing changed
    no-console-indexes the dl_jobs indexes the console and the API's filters read, which the claim,
                       the lease and the seed's contract do not need, dropped: every status change
                       is a non-HOT update, which writes an entry in each of them
    no-journal         dl_job_events inserts skipped (a BEFORE INSERT trigger returning NULL):
                       the picked and done events
    no-journal-fk      the journal's foreign key to dl_jobs dropped (its check per event)
    no-update-trigger  dl_jobs' statement trigger on UPDATE disabled: the kept counts, the
                       throughput minutes, the dependencies' reaction and the ready NOTIFY
    none-of-these      all four at once: what is left is the claim, the lease and the outcome

Only a measurement: a variant breaks what its change removes (the console's speed at size, the
journal the seed asks for, the counts). The server is bench/fleet.py's scratch one (fsync off).
"""

import argparse
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("BENCH_DB_PREFIX", "ablation")

import psycopg
from common import BENCH_DATABASES, create_bench_databases, database_url, print_table
from fleet import scratch_server
from psycopg import sql
from queue_peers import TARGET, Ours, PgQueuer, Run, drain

# Kept: the primary key and idempotency_key's unique constraint, the seed's three (claim, running
# lease, status and queue), and what the claim and the lease read (claim order, lock keys).
CONSOLE_INDEXES = [
    "ix_dl_jobs_args",
    "ix_dl_jobs_created_brin",
    "ix_dl_jobs_errored",
    "ix_dl_jobs_finished",
    "ix_dl_jobs_ingestion_run",
    "ix_dl_jobs_lock_key_job",
    "ix_dl_jobs_partition_job",
    "ix_dl_jobs_queue_job",
    "ix_dl_jobs_queue_status_job",
    "ix_dl_jobs_signature",
    "ix_dl_jobs_task_job",
    "ix_dl_jobs_task_status_job",
]
SKIP_JOURNAL = """
CREATE FUNCTION ablation_skip_row() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RETURN NULL; END';
CREATE TRIGGER ablation_skip_journal BEFORE INSERT ON dl_job_events FOR EACH ROW EXECUTE FUNCTION ablation_skip_row();
"""
DISABLE_UPDATE_TRIGGER = """
DO $$ DECLARE name text; BEGIN
    FOR name IN SELECT tgname FROM pg_trigger WHERE tgrelid = 'dl_jobs'::regclass AND tgname LIKE '%notify_upd%' LOOP
        EXECUTE format('ALTER TABLE dl_jobs DISABLE TRIGGER %I', name);
    END LOOP;
END $$;
"""
VARIANTS = {
    "shipped": [],
    "no-console-indexes": [f"DROP INDEX {name}" for name in CONSOLE_INDEXES],
    "no-journal": [SKIP_JOURNAL],
    "no-journal-fk": ["ALTER TABLE dl_job_events DROP CONSTRAINT dl_job_events_job_id_fkey"],
    "no-update-trigger": [DISABLE_UPDATE_TRIGGER],
}
VARIANTS["none-of-these"] = [change for name in VARIANTS for change in VARIANTS[name]]


class Variant(Ours):
    """Our worker on a copy of the migrated database, changed by its variant's statements."""

    def __init__(self, params: dict, env: dict, *, name: str):
        self.name, self.database = name, f"{BENCH_DATABASES['default']}_{name.replace('-', '_')}"
        super().__init__(params, {**env, "DATABASE_URL": database_url({**params, "dbname": self.database})})

    def create(self) -> None:
        with psycopg.connect(**self.params, autocommit=True) as conn:
            template = sql.Identifier(BENCH_DATABASES["default"])
            conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(self.database), template))
        with self.connect() as conn:
            for change in VARIANTS[self.name]:
                conn.execute(change)


def measure(args) -> dict[str, list[Run]]:
    with (
        tempfile.TemporaryDirectory(prefix="drain-ablation-") as directory,
        scratch_server(Path(directory)) as (params, _log),
    ):
        env = create_bench_databases(params)
        variants = [Variant(params, env, name=name) for name in args.variants]
        for variant in variants:
            variant.create()
        peer = PgQueuer(params, env)
        with psycopg.connect(**params, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(peer.database)))
        peer.install()
        systems = [*variants, peer]
        runs: dict[str, list[Run]] = {system.name: [] for system in systems}
        for _round in range(args.rounds):
            for system in systems:
                runs[system.name].append(drain(system, jobs=args.jobs, concurrency=args.concurrency))
                print(f"  {system.name:<20} {runs[system.name][-1].steady:7,.0f} jobs/s", flush=True)
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    runs = measure(args)
    steady = {name: statistics.median(run.steady for run in system_runs) for name, system_runs in runs.items()}
    shipped = steady.get("shipped")
    rows = [
        (
            name,
            f"{steady[name]:7,.0f} jobs/s",
            f"{steady[name] / steady[PgQueuer.name]:.2f}× pgqueuer",
            f"{steady[name] / shipped:.2f}× shipped" if shipped and name != PgQueuer.name else "",
            "runs " + " | ".join(f"{run.steady:,.0f}" for run in system_runs),
        )
        for name, system_runs in runs.items()
    ]
    print_table(
        f"Steady drain of {args.jobs:,} no-op jobs, concurrency {args.concurrency}, {args.rounds} round(s) "
        f"taking turns, medians (target as shipped: ≥ {TARGET}× pgqueuer)",
        rows,
    )


if __name__ == "__main__":
    main()
