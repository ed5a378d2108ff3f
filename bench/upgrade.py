"""A release rolled out while the queue works: the previous release's fleet at a steady rate, the
new release's migrations applied under it, the new release's workers and web started beside the
old, the old stopped. Nothing may stall, be lost, run twice or fail against the new schema.

    .venv/bin/python bench/upgrade.py                   # from the previous release (CHANGELOG.md), 1,000 jobs/s
    .venv/bin/python bench/upgrade.py --from v0.1.0 --rate 500 --json var/upgrade.json

The previous release's code is taken from git (``git archive`` of its commit into a temporary
directory; it runs with this checkout's virtualenv, so both releases must pin the same packages).
A scratch PostgreSQL server is made for the run, as for the chaos bench. Then, on it:

    old        its migrations; two `runworker --queue chaos:16` and the web server (gunicorn, as
               deployed) of the old release; its producer sending --rate no-op jobs a second
               through job_enqueue_many (it stays the old release's to the end: a producer of the
               previous release must keep working against the new schema)
    rollout    the new release's `migrate` on both databases, begun while a reader holds every
               table, until --reader-sec after a migration waits for it (as a pg_dump would: the
               migration must give up waiting and try again); its two workers and web server started and registered; the old
               workers stopped (SIGTERM: they finish what they run) and the old web server
    new        the new release alone, then the producer stops and the backlog drains

Measured: the chaos bench's table (jobs lost, run twice, pickup p99 per phase: clean = old,
fault = rollout, recovery = new), and besides: pickups later than 1 s, the longest any statement
of the service waited on a lock held or asked for by a migration, the longest lock each migration
held on each queue table (pg_locks sampled every 10 ms), and the errors each release logged.
Targets: no stall over 1 s, nothing lost or run twice, no error logged.
"""

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import psycopg
from chaos import QUEUE, WORKER_SLOTS, Rig, direct_environment, producing, wait_for_backlog
from chaos_report import Phases, WebProbe, print_report, scenario_report
from common import PYTHON, ROOT, Background, manage, stop
from fleet import DATABASES, scratch_server, web

from tests.migration_helpers import HOT_TABLES, LOCK_LOG_INSTALL, LOCK_LOG_REMOVE, locks_taken, service_tables

STALL_SEC = 1.0
SAMPLE_SEC = 0.01


def previous_release() -> tuple[str, str]:
    """(version, commit) of the release before this one, as CHANGELOG.md records it."""
    releases = re.findall(
        r"^## \[?(\d+\.\d+\.\d+)\]? .*?commit ([0-9a-f]{7,40})", (ROOT / "CHANGELOG.md").read_text(), re.M
    )
    if not releases:
        raise SystemExit("CHANGELOG.md names no earlier release with its commit")
    return releases[0]


PINNED = ("requirements.txt", "requirements/service.txt")


def checkout(commit: str, directory: Path) -> tuple[Path, Path]:
    """The tree of ``commit`` written out to ``directory/code`` (no git metadata), and
    ``directory/packages``: the packages it pins that this checkout's virtualenv lacks or holds at
    another version, installed there (on its PYTHONPATH, before the virtualenv's)."""
    code, packages = directory / "code", directory / "packages"
    code.mkdir()
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", code], input=archive, check=True)
    wanted = {line for name in PINNED if (code / name).exists() for line in _pins(code / name)}
    missing = sorted(wanted - {line for name in PINNED for line in _pins(ROOT / name)})
    if missing:
        command = [PYTHON, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps"]
        subprocess.run([*command, "--target", packages, *missing], check=True)
    return code, packages


def _pins(path: Path) -> set[str]:
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return {line for line in lines if "==" in line and not line.startswith("-")}


class LockWatch(Background):
    """pg_locks every 10 ms: how long each migration held a lock on each table of the service, and
    how long any other session waited on a lock a migration held or was waiting for."""

    QUERY = """
    SELECT a.pid, a.application_name, c.relname, l.mode, l.granted,
           EXISTS (SELECT 1 FROM pg_stat_activity m WHERE m.pid = ANY(pg_blocking_pids(a.pid))
                   AND m.application_name LIKE 'migrate %%') AS behind_migration
      FROM pg_locks l JOIN pg_stat_activity a USING (pid) JOIN pg_class c ON c.oid = l.relation
     WHERE l.locktype = 'relation' AND c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace
       AND ((a.application_name LIKE 'migrate %%' AND l.granted AND c.relname NOT LIKE 'django%%' AND c.relname <> 'migration_lock_log') OR NOT l.granted)
    """

    def __init__(self, server: dict):
        super().__init__()
        self.server = server
        self.held: dict[tuple[str, str, str], float] = {}  # (migration, table, mode) → longest hold
        self.longest_wait_sec = 0.0

    def _run(self) -> None:
        connections = [
            psycopg.connect(**{**self.server, "dbname": name}, autocommit=True) for name in DATABASES.values()
        ]
        since: dict[tuple, float] = {}
        try:
            while not self._stop.wait(SAMPLE_SEC):
                now, seen = time.monotonic(), set()
                for conn in connections:
                    for pid, application, table, mode, granted, behind in conn.execute(self.QUERY):
                        if application.startswith("migrate ") and granted:
                            key = ("held", application.removeprefix("migrate "), table, mode)
                        elif behind:
                            key = ("waits", pid, table, mode)
                        else:
                            continue
                        seen.add(key)
                        since.setdefault(key, now)
                for key in list(since):
                    if key not in seen:
                        self._ended(key, now - since.pop(key))
        finally:
            for conn in connections:
                conn.close()

    def _ended(self, key: tuple, seconds: float) -> None:
        kind, who, table, mode = key
        if kind == "held":
            self.held[(who, table, mode)] = max(self.held.get((who, table, mode), 0.0), seconds)
        else:
            self.longest_wait_sec = max(self.longest_wait_sec, seconds)


class Release:
    """One release's processes: its workers and its web server, from its own code."""

    def __init__(self, name: str, code: Path, env: dict, logs: Path, *, packages: Path | None = None):
        self.name, self.code, self.logs = name, code, logs
        self.env = {**env, "PYTHONPATH": ":".join(str(path) for path in (code, packages) if path)}
        self.logs.mkdir()
        self.workers: list[subprocess.Popen] = []
        self.stack = ExitStack()

    def start(self, *, workers: int, web_workers: int) -> int:
        for index in range(workers):
            log = (self.logs / f"worker-{index}.log").open("a")
            command = [PYTHON, "manage.py", "runworker", "--queue", f"{QUEUE}:{WORKER_SLOTS}"]
            self.workers.append(
                subprocess.Popen(command, cwd=self.code, env=self.env, stdout=log, stderr=subprocess.STDOUT)
            )
        return self.stack.enter_context(web(self.env, self.logs, code=self.code, workers=web_workers))

    def stop(self) -> list[int]:
        codes = [stop(worker, timeout=120) for worker in self.workers]
        self.stack.close()
        return codes

    def errors(self) -> list[str]:
        """Lines its processes logged at ERROR or above, and tracebacks."""
        found = []
        for path in sorted(self.logs.glob("*.log")):
            for line in path.read_text(errors="replace").splitlines():
                if re.search(r'"level": ?"(ERROR|CRITICAL)"', line) or line.startswith("Traceback"):
                    found.append(f"{path.name}: {line[:200]}")
        return found


def registered_workers(server: dict) -> int:
    with psycopg.connect(**{**server, "dbname": DATABASES["default"]}, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM dl_workers").fetchone()[0]


def wait_for_workers(server: dict, count: int, release: Release) -> None:
    deadline = time.monotonic() + 60
    while registered_workers(server) < count:
        if time.monotonic() > deadline or any(worker.poll() is not None for worker in release.workers):
            raise RuntimeError(f"the {release.name} release's workers did not start: see {release.logs}")
        time.sleep(0.2)


def late_pickups(conn) -> tuple[int, float]:
    """(jobs picked more than STALL_SEC after they were queued, the longest wait of any)."""
    late, longest = conn.execute(
        """
        SELECT count(*) FILTER (WHERE wait > %(stall)s), coalesce(max(wait), 0) FROM (
            SELECT extract(epoch FROM min(e.ts) - j.created_at) AS wait
              FROM dl_jobs j JOIN dl_job_events e USING (job_id)
             WHERE j.queue = %(queue)s AND e.kind = 'picked' GROUP BY j.job_id, j.created_at) w
        """,
        {"stall": STALL_SEC, "queue": QUEUE},
    ).fetchone()
    return late, float(longest)


@contextmanager
def long_reader(server: dict, seconds: float):
    """A transaction holding ACCESS SHARE on every table of the control database (as a pg_dump or a
    long report does) from the moment the block begins until ``seconds`` after a migration first
    waits behind it."""
    params = {**server, "dbname": DATABASES["default"]}
    conn = psycopg.connect(**params)
    conn.execute(f"LOCK TABLE {service_tables(conn)} IN ACCESS SHARE MODE")
    done = threading.Event()

    def hold() -> None:
        with psycopg.connect(**params, autocommit=True) as watcher:
            deadline = time.monotonic() + 120
            while not done.is_set() and time.monotonic() < deadline:
                waiting = watcher.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'migrate %%' "
                    "AND wait_event_type = 'Lock'"
                ).fetchone()[0]
                if waiting:
                    break
                time.sleep(0.02)
        done.wait(seconds)
        conn.rollback()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        yield
    finally:
        done.set()
        holder.join()
        conn.close()


def roll_out(args, old: Release, new: Release, server: dict, probe: WebProbe) -> dict:
    """The rollout phase: the new migrations (a long reader holding every table as they begin),
    the new fleet beside the old, the old stopped."""
    timings = {}
    started = time.monotonic()
    env = direct_environment(server)
    connections = [psycopg.connect(**{**server, "dbname": name}, autocommit=True) for name in DATABASES.values()]
    for conn in connections:
        conn.execute(LOCK_LOG_INSTALL)
    with long_reader(server, args.reader_sec):
        migrated = {alias: manage(env, "migrate", "--noinput", "--database", alias) for alias in DATABASES}
    for conn in connections:
        timings.setdefault("locks taken", []).extend(
            f"{lock.migration} {lock.table} {lock.mode}" for lock in locks_taken(conn)
        )
        conn.execute(LOCK_LOG_REMOVE)
        conn.close()
    timings["migrate s"] = round(time.monotonic() - started, 2)
    # Django records each migration on every database; the router lets its operations run on one.
    timings["migrations applied"] = {
        alias: list(dict.fromkeys(line.split()[1].rstrip(".") for line in text.splitlines() if "Applying " in line))
        for alias, text in migrated.items()
    }
    timings["lock waits given up"] = sum(text.count("gave up waiting") for text in migrated.values())
    probe.port = new.start(workers=args.workers, web_workers=args.web_workers)
    wait_for_workers(server, 2 * args.workers, new)
    timings["new fleet up s"] = round(time.monotonic() - started, 2)
    timings["old exit codes"] = old.stop()
    timings["rollout s"] = round(time.monotonic() - started, 2)
    return timings


def run(args) -> dict:
    version, commit = (args.previous_version, args.commit) if args.commit else previous_release()
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="upgrade-")))
        directory.chmod(0o755)
        for name in ("server", "old", "logs"):
            (directory / name).mkdir()
        server, _log = stack.enter_context(scratch_server(directory / "server"))
        old_code, old_packages = checkout(commit, directory / "old")
        env = direct_environment(server)
        with psycopg.connect(**server, autocommit=True) as conn:
            for name in DATABASES.values():
                conn.execute(f'CREATE DATABASE "{name}"')
        old = Release(f"old ({version})", old_code, env, directory / "logs" / "old", packages=old_packages)
        for alias in DATABASES:
            manage(old.env, "migrate", "--noinput", "--database", alias, code=old.code)
        new = Release("new", ROOT, env, directory / "logs" / "new")
        port = old.start(workers=args.workers, web_workers=args.web_workers)
        stack.callback(new.stop)
        stack.callback(old.stop)
        wait_for_workers(server, args.workers, old)
        token = manage(env, "apitoken", "create", "upgrade").strip()
        rig = Rig(server=server, directory=directory / "server", env=old.env, logs=directory / "logs")
        rig.control_file = rig.logs / "control.json"
        rig.set_rate(args.rate)
        phases = Phases()
        with WebProbe(port, token) as probe, LockWatch(server) as watch:
            with producing(rig, "upgrade", code=old.code):
                time.sleep(args.warmup_sec)
                phases.mark("clean", rig.logs)
                time.sleep(args.clean_sec)
                phases.mark("fault", rig.logs)
                rollout = roll_out(args, old, new, server, probe)
                phases.mark("recovery", rig.logs)
                time.sleep(args.recovery_sec)
                phases.mark("end", rig.logs)
            drain_sec = wait_for_backlog(rig, rig.counters["producer"]["offered"], timeout=600)
        with rig.direct() as conn:
            report = scenario_report(conn, f"from {version}", phases, rig.counters, probe, drain_sec, args.rate)
            report["late pickups"], report["longest pickup s"] = late_pickups(conn)
        hot = {key: sec for key, sec in watch.held.items() if key[1] in HOT_TABLES}
        report.update(
            {
                "rollout": rollout,
                "longest wait behind a migration s": round(watch.longest_wait_sec, 3),
                "migration locks": {" ".join(key): round(sec, 3) for key, sec in watch.held.items()},
                "migration locks on queue tables": {" ".join(key): round(sec, 3) for key, sec in hot.items()},
                "errors logged": {"old": old.errors(), "new": new.errors()},
            }
        )
        return report


def print_upgrade(report: dict) -> None:
    print_report([report], header=True)
    print(f"    rollout: {report['rollout']}")
    print(
        f"    pickups later than {STALL_SEC:g} s: {report['late pickups']} (longest {report['longest pickup s']:.2f} s); "
        f"longest wait behind a migration: {report['longest wait behind a migration s']:.3f} s"
    )
    print(f"    locks the migrations took (their DDL's, all tables): {report['rollout']['locks taken'] or 'none'}")
    print(f"    locks migrations held (longest seen, sampled every 10 ms, s): {report['migration locks'] or 'none'}")
    print(f"    of them on queue tables: {report['migration locks on queue tables'] or 'none'}")
    for release, lines in report["errors logged"].items():
        print(f"    errors logged by the {release} release: {len(lines)}")
        for line in lines[:5]:
            print(f"      {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--from", dest="commit", help="the previous release's commit or tag (default: CHANGELOG.md's)")
    parser.add_argument("--previous-version", default="previous", help="its name in the report, with --from")
    parser.add_argument("--rate", type=float, default=1000, help="jobs a second offered (default 1,000)")
    parser.add_argument("--warmup-sec", type=float, default=10)
    parser.add_argument("--clean-sec", type=float, default=15)
    parser.add_argument("--recovery-sec", type=float, default=15)
    parser.add_argument(
        "--reader-sec",
        type=float,
        default=2,
        help="a reader holds every table from migrate's start until this long after a migration waits for it (default 2)",
    )
    parser.add_argument("--workers", type=int, default=2, help="runworker processes of each release (default 2)")
    parser.add_argument("--web-workers", type=int, default=4, help="its web server's workers (default 4)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    report = run(args)
    print_upgrade(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
