"""Database states (jobs.dbstates, the sqlrs-like engine): prepare → instance ready, beside a hand floor.

    PYTHONPATH=. .venv/bin/python bench/dbstates.py                  # 30 rounds
    make bench-dbstates BENCH_ARGS="--rounds 5"

A real worker (the runworker runtime, in a thread of this process, default settings: it claims
on NOTIFY) serves the engine's queue; the bench submits with services.prepare_job_submit and
follows the job as a client would (LISTEN sqlrs_events, re-reading the job's status on each
notification), then connects to result["dsn"] (psycopg connect + SELECT 1). Each round, in
turns (the VM's speed drifts), the order flipping every round:

1. cached     an identical prepare (its state already built): submit → succeeded → connected.
   floor      by hand: cp -a the cached state → start a server → connect.
2. uncached   a prepare of a 1,000-row script (CREATE TABLE + 1,000 INSERT lines, or one
              INSERT … generate_series with --script series; a comment with the round number
              makes each round's script new): submit → succeeded → connected.
3. floor      the same script by hand: cp -a the image's base (the engine's initdb output) →
              start → psql -X -v ON_ERROR_STOP=1 -f → CHECKPOINT → fast stop → cp -a → start →
              connect. Servers are started and stopped with the engine's own helpers
              (jobs.dbstates.engine.postgres.start/stop: the postgres binary, as the engine's server
              user, with its settings — fsync off — and its 5 ms readiness poll; pg_ctl -w
              would poll every 100 ms and flatter the engine).

Each instance is stopped after it is measured, outside the timing. The engine's functions are
wrapped in place (on the worker's threads only) to show where a prepare's time goes; the
engine's files are not changed. Targets: cached p50 ≤ 1 s; uncached p50 ≤ 1.3× the floor.

The copies (~970 files a data directory) dominate, and their cost is the file system's: on ext4
without a journal, creating a file scans past the inodes deleted nearby in the last minutes
(the kernel's recently_deleted()), from 0.02 to 0.9 ms a file here depending on what was
deleted lately (by the tests, by this bench). So the bench prints that cost at its start and
end, keeps every directory until the end (--remove-each removes them as it goes), puts the
floor's directories beside the engine's (<store>/jobs/, <store>/instances/), and prints each
p50 without the copies too.

Runs on fresh bench_dbstates / bench_dbstates_pipeline databases on the configured server
(embedded PostgreSQL unless DATABASE_URL is set) and a state store in a temporary directory
under /tmp (a server's Unix socket path must stay short); drops and removes them afterwards.
"""

import argparse
import functools
import importlib
import itertools
import os
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

import psycopg
from common import (
    BENCH_DATABASES,
    BENCH_PREFIX,
    create_bench_databases,
    drop_bench_databases,
    print_table,
    server_params,
    use_bench_databases,
)

# The bench's own databases (common's helpers create, select and drop BENCH_DATABASES).
BENCH_DATABASES.update(default=f"{BENCH_PREFIX}_dbstates", pipeline=f"{BENCH_PREFIX}_dbstates_pipeline")

CACHED_TARGET_SEC = 1.0
RATIO_TARGET = 1.3
ROWS = 1000
JOB_TIMEOUT_SEC = 300
HANDLER = "handler (prepare_job_run)"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def quantile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def script_text(tag: str, style: str) -> str:
    lines = [
        f"-- bench {tag}",
        "CREATE TABLE bench_rows (id int PRIMARY KEY, name text NOT NULL,"
        " created_at timestamptz NOT NULL DEFAULT now());",
    ]
    if style == "series":
        lines.append(f"INSERT INTO bench_rows (id, name) SELECT n, 'row ' || n FROM generate_series(1, {ROWS}) AS n;")
    else:
        lines += [f"INSERT INTO bench_rows (id, name) VALUES ({n}, 'row {n}');" for n in range(1, ROWS + 1)]
    return "\n".join(lines) + "\n"


def connect_ready(dsn: str) -> None:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        conn.execute("SELECT 1").fetchone()


# --- tracing the engine -------------------------------------------------------------------


class Tracer:
    """Wraps engine functions in place; records (label, thread, start, end) of calls on threads other
    than the main one (the worker's). The main thread (the bench, the floor) goes untraced."""

    def __init__(self):
        self.spans: list[tuple[str, int, float, float]] = []
        self._lock = threading.Condition()
        self._originals = []

    def wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name, None)
        if original is None:  # the engine changed: trace what is there
            print(f"note: {module.__name__}.{name} not found, not traced")
            return

        @functools.wraps(original)
        def traced(*args, **kwargs):
            thread = threading.current_thread()
            if thread is threading.main_thread():
                return original(*args, **kwargs)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                with self._lock:
                    self.spans.append((label, thread.ident, started, time.perf_counter()))
                    self._lock.notify_all()

        setattr(module, name, traced)
        self._originals.append((module, name, original))

    def take(self, *, until: str | None = None, timeout: float = 60.0) -> list[tuple[str, int, float, float]]:
        """The spans recorded since the last take; with ``until``, once a span of that label has ended."""
        with self._lock:
            if until is not None:
                self._lock.wait_for(lambda: any(span[0] == until for span in self.spans), timeout)
            spans, self.spans = self.spans, []
        return spans

    def restore(self) -> None:
        for module, name, original in reversed(self._originals):
            setattr(module, name, original)
        self._originals.clear()


def trace_engine(tracer: Tracer) -> None:
    """Wrap the engine's steps by module and name (the executor looks them up at each call)."""
    targets = [
        ("job_handlers", "prepare_job_run", HANDLER),
        ("services", "job_start", "job_start"),
        ("executor", "_plan", "plan (resolve image, hash, store plan)"),
        ("executor", "_state_execute", "state_execute"),
        ("steps", "base_ensure", "base_ensure"),
        ("executor", "_runtime_clear", "runtime_clear"),
        ("statefs", "snapshot", "snapshot (cp -a)"),
        ("postgres", "own", "own (chown -R)"),
        ("postgres", "start", "server start"),
        ("postgres", "run_lines", "psql"),
        ("services", "job_log", "job_log (log events)"),
        ("postgres", "checkpoint", "CHECKPOINT"),
        ("postgres", "stop", "server stop"),
        ("statefs", "write_marker", "write_marker"),
        ("statefs", "markers_make_durable", "markers_make_durable (syncfs, after job_finish)"),
        ("statefs", "size_bytes", "size_bytes"),
        ("executor", "instance_start", "instance_start"),
        ("services", "task_status_set", "task_status_set"),
        ("services", "job_finish", "job_finish"),
        ("cache", "cache_evict", "cache_evict (after job_finish, after a build)"),
    ]
    for module, name, label in targets:
        tracer.wrap(importlib.import_module(f"jobs.dbstates.{module}"), name, label)


def span_tree(spans) -> dict[tuple[str, ...], float]:
    """Seconds per call path (labels of the enclosing spans, outermost first), summed over calls."""
    totals: dict[tuple[str, ...], float] = {}
    spans = sorted(spans, key=lambda s: (s[2], -s[3]))  # paths in order of their first start: parents first
    for span in spans:
        label, thread, start, end = span
        parents = sorted(
            (s for s in spans if s is not span and s[1] == thread and s[2] <= start and end <= s[3]),
            key=lambda s: (s[2], -s[3]),
        )
        path = (*(s[0] for s in parents), label)
        totals[path] = totals.get(path, 0.0) + (end - start)
    return totals


# --- the engine ---------------------------------------------------------------------------


class Engine:
    """Submits prepares and follows them to a connected instance, as a client would."""

    def __init__(self, params: dict, image_id: str, tracer: Tracer, *, remove: bool):
        self.image_id = image_id
        self.remove = remove
        self.tracer = tracer
        self.listener = psycopg.connect(**{**params, "dbname": BENCH_DATABASES["default"]}, autocommit=True)
        self.listener.execute("LISTEN sqlrs_events")

    def close(self) -> None:
        self.listener.close()

    def prepare(self, script: Path) -> dict:
        """Submit → succeeded → connected; the seconds of each phase (they add up to ``total``)."""
        from jobs.dbstates import services
        from jobs.dbstates.engine.steps import PrepareRequest

        self.tracer.take()
        started = time.perf_counter()
        job = services.prepare_job_submit(
            request=PrepareRequest(prepare_kind="psql", image_id=self.image_id, psql_args=["-f", str(script)])
        )
        submitted = time.perf_counter()
        result = self._wait_succeeded(job.job_id)
        seen = time.perf_counter()
        connect_ready(result["dsn"])
        connected = time.perf_counter()
        # The job is succeeded (committed) before its handler returns: wait for the handler's end
        # (untimed), so that its span is in, and the next prepare finds the worker idle.
        spans = self.tracer.take(until=HANDLER)
        self._instance_drop(result["instance_id"])
        handler = next((s for s in spans if s[0] == HANDLER), None)
        if handler is None:
            raise RuntimeError("the handler's end was not seen within 60 s")
        figures = {
            "total": connected - started,
            "submit (prepare_job_submit)": submitted - started,
            "pickup (submitted → handler entered)": handler[2] - submitted,
            "handler (prepare_job_run)": handler[3] - handler[2],
            "seen (client saw succeeded − handler returned)": seen - handler[3],
            "connect + SELECT 1": connected - seen,
        }
        return {"figures": figures, "tree": span_tree(spans), "result": result}

    def _wait_succeeded(self, job_id: str) -> dict:
        from jobs.dbstates.models import PrepareJob

        deadline = time.monotonic() + JOB_TIMEOUT_SEC
        while True:
            status, result, error = PrepareJob.objects.values_list("status", "result", "error").get(job_id=job_id)
            if status == "succeeded":
                return result
            if status in ("failed", "canceled", "cancelled"):
                raise RuntimeError(f"prepare job {job_id} {status}: {error}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"prepare job {job_id} still {status} after {JOB_TIMEOUT_SEC} s")
            for note in self.listener.notifies(timeout=1.0):
                if job_id in note.payload.split(","):
                    break

    def _instance_drop(self, instance_id: str) -> None:
        from jobs.dbstates.engine import postgres, statefs
        from jobs.dbstates.models import Instance

        data_dir = Path(Instance.objects.get(instance_id=instance_id).runtime_dir)
        postgres.stop(data_dir, immediate=True)
        if self.remove:
            statefs.remove(data_dir)
            postgres.log_path(data_dir).unlink(missing_ok=True)


# --- the hand floor -----------------------------------------------------------------------


class Floor:
    """The same work by hand, with the engine's server helpers (as its server user, its settings).

    Its directories sit where the engine's do (a build under <store>/jobs/, an instance under
    <store>/instances/): on ext4 without a journal, creating a file costs what the inode
    allocator's scan of its block group's recently deleted inodes costs, so the same parent
    directories make the same copies cost the same."""

    def __init__(self, image, store: Path, *, remove: bool):
        self.image = image
        self.store = store
        self.remove = remove

    def _copy(self, source: Path, target: Path) -> None:
        subprocess.run(["cp", "-a", str(source), str(target)], check=True, capture_output=True)

    @contextmanager
    def _dirs(self, *names: str):
        from jobs.dbstates.engine import postgres, statefs

        tag = uuid.uuid4().hex
        where = {
            "build": self.store / "jobs" / f"floor-{tag}" / "runtime",
            "instance": self.store / "instances" / f"floor-{tag}",
        }
        dirs = [where[name] for name in names]
        for data_dir in dirs:
            data_dir.parent.mkdir(parents=True, exist_ok=True)
        try:
            yield dirs
        finally:
            for data_dir in dirs:
                postgres.stop(data_dir, immediate=True)
                if not self.remove:
                    continue
                if data_dir.exists():
                    statefs.remove(data_dir)
                postgres.log_path(data_dir).unlink(missing_ok=True)
                if data_dir.parent.name.startswith("floor-"):
                    data_dir.parent.rmdir()

    def cached(self, state: Path) -> dict:
        """cp -a the state → start → connect."""
        from jobs.dbstates.engine import postgres

        with self._dirs("instance") as (instance,):
            marks = [("", time.perf_counter())]
            self._copy(state, instance)
            marks.append(("cp -a state", time.perf_counter()))
            server = postgres.start(self.image, instance)
            marks.append(("server start", time.perf_counter()))
            connect_ready(server.dsn)
            marks.append(("connect + SELECT 1", time.perf_counter()))
        return phases(marks)

    def uncached(self, base: Path, script: Path) -> dict:
        """cp -a base → start → psql -f → CHECKPOINT → fast stop → cp -a → start → connect."""
        from jobs.dbstates.engine import postgres

        with self._dirs("build", "instance") as (build, instance):
            marks = [("", time.perf_counter())]
            self._copy(base, build)
            marks.append(("cp -a base", time.perf_counter()))
            server = postgres.start(self.image, build)
            marks.append(("server start", time.perf_counter()))
            subprocess.run(
                [self.image.program("psql"), "-X", "-v", "ON_ERROR_STOP=1", "-f", str(script)],
                env=postgres.client_env(server),
                check=True,
                stdout=subprocess.DEVNULL,
            )
            marks.append(("psql -f", time.perf_counter()))
            postgres.checkpoint(server)
            marks.append(("CHECKPOINT", time.perf_counter()))
            postgres.stop(build)
            marks.append(("server stop (fast)", time.perf_counter()))
            self._copy(build, instance)
            marks.append(("cp -a state", time.perf_counter()))
            server = postgres.start(self.image, instance)
            marks.append(("server start (instance)", time.perf_counter()))
            connect_ready(server.dsn)
            marks.append(("connect + SELECT 1", time.perf_counter()))
        return phases(marks)


def phases(marks: list[tuple[str, float]]) -> dict:
    figures = {"total": marks[-1][1] - marks[0][1]}
    for (_, before), (name, after) in itertools.pairwise(marks):
        figures[name] = after - before
    return {"figures": figures}


# --- the run ------------------------------------------------------------------------------


@contextmanager
def engine_worker(concurrency: int):
    """The runworker runtime serving the engine's queue, in a thread of this process (default settings)."""
    from django.conf import settings

    import jobs.dbstates.job_handlers  # noqa: F401  (registers sqlrs.prepare)
    from jobs.queue.handlers import registry
    from jobs.runtime.build import build_worker
    from jobs.runtime.config import WorkerConfig

    worker = build_worker(WorkerConfig.from_settings({"queue": {settings.SQLRS_QUEUE: concurrency}}), registry)
    thread = threading.Thread(target=worker.run, name="sqlrs-worker", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=60)
        if thread.is_alive():
            print("warning: the worker did not stop within 60 s")


def servers_stop(store: Path) -> int:
    """Stop every server left under the bench's state store; how many were running."""
    from jobs.dbstates.engine import postgres

    stopped = 0
    for pid_file in store.glob("**/postmaster.pid"):
        stopped += postgres.stop(pid_file.parent, immediate=True)
    return stopped


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.1f} ms"


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(run["figures"][key] for run in runs)


def print_phases(title: str, runs: list[dict]) -> None:
    """Median of each phase (they add up to the total's median only roughly), with the traced tree."""
    rows = [(name, ms(median_of(runs, name))) for name in runs[0]["figures"]]
    if "tree" in runs[0]:
        paths: list[tuple[str, ...]] = []
        for run in runs:  # in the order of first appearance
            paths += [path for path in run["tree"] if path not in paths]
        for path in paths:
            if len(path) < 2:
                continue  # the handler itself is a phase above
            values = [run["tree"].get(path, 0.0) for run in runs]
            rows.append(("  " * (len(path) - 1) + path[-1], ms(statistics.median(values))))
    print_table(title, rows)


def create_cost_ms(directory: Path, files: int = 500) -> float:
    """Milliseconds to create an empty file in a new directory under ``directory`` (what a copy of a
    data directory, ~1,000 files, pays per file beside its bytes)."""
    probe = Path(tempfile.mkdtemp(prefix="probe-", dir=directory))
    try:
        started = time.perf_counter()
        for number in range(files):
            os.close(os.open(probe / str(number), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        return (time.perf_counter() - started) * 1000 / files
    finally:
        subprocess.run(["rm", "-rf", str(probe)], check=False)


def describe(args, image, store: Path, first: dict, base: Path, state: Path) -> None:
    from jobs.dbstates.engine import postgres, statefs

    fs_type = subprocess.run(
        ["stat", "-f", "-c", "%T", str(store)], capture_output=True, text=True, check=False
    ).stdout.strip()

    def size(path: Path) -> str:
        files = sum(len(names) for _dir, _dirs, names in os.walk(path))
        return f"{statefs.size_bytes(path) / 2**20:.0f} MiB in {files:,} files"

    print(
        f"{os.cpu_count()} CPUs; image {args.image} → {image.resolved_id[:32]}… ({image.bin_dir}); "
        f"servers run as {postgres.os_user() or 'this user'}\n"
        f"state store {store} ({fs_type}, {create_cost_ms(store / 'instances'):.2f} ms to create a file); "
        f"base {size(base)}, state {size(state)}\n"
        f"first prepare (initdb + build + instance, untimed): {first['figures']['total']:.2f} s; "
        f"{args.warmup} warm-up + {args.rounds} rounds; uncached script: {args.script} ({ROWS:,} rows)"
    )


def copy_seconds(run: dict) -> float:
    """The seconds a run spent copying data directories (the engine's snapshots, the floor's cp -a)."""
    if "tree" in run:
        return sum(seconds for path, seconds in run["tree"].items() if path[-1] == "snapshot (cp -a)")
    return sum(seconds for name, seconds in run["figures"].items() if name.startswith("cp -a"))


def print_summary(args, runs: dict[str, list[dict]]) -> None:
    width = 16
    rows = [("metric", "engine".rjust(width), "floor (by hand)".rjust(width), "ratio".rjust(7), "  target")]

    def row(label: str, engine: float, floor: float, target: str = "") -> None:
        cells = [f"{engine * 1000:.0f} ms".rjust(width), f"{floor * 1000:.0f} ms".rjust(width)]
        rows.append((label, *cells, f"{engine / floor:6.2f}×", target))

    for kind, label in (("cached", "1. cached prepare"), ("uncached", f"2./3. uncached {ROWS:,}-row prepare")):
        engine = [run["figures"]["total"] for run in runs[kind]]
        floor = [run["figures"]["total"] for run in runs[f"{kind} floor"]]
        p50, floor_p50 = statistics.median(engine), statistics.median(floor)
        if kind == "cached":
            target = f"  p50 ≤ {CACHED_TARGET_SEC:g} s: {verdict(p50 <= CACHED_TARGET_SEC)}"
        else:
            target = f"  p50 ≤ {RATIO_TARGET}× floor: {verdict(p50 / floor_p50 <= RATIO_TARGET)}"
        row(f"{label}, p50", p50, floor_p50, target)
        row(f"{label}, p99", quantile(engine, 0.99), quantile(floor, 0.99))
        row(
            f"{label}, p50 without its copies",
            statistics.median(run["figures"]["total"] - copy_seconds(run) for run in runs[kind]),
            statistics.median(run["figures"]["total"] - copy_seconds(run) for run in runs[f"{kind} floor"]),
            "  (copies: see --help)",
        )
    print_table(
        f"prepare → instance ready (submit → job succeeded → psycopg connect + SELECT 1), "
        f"{args.rounds} interleaved rounds"
        + (" (p99 of fewer than 100 rounds: the slowest)" if args.rounds < 100 else ""),
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    parser.add_argument("--image", default="postgres:15")
    parser.add_argument(
        "--script",
        choices=("inserts", "series"),
        default="inserts",
        help=f"the uncached script: {ROWS:,} INSERT lines (default) or one INSERT … generate_series",
    )
    parser.add_argument(
        "--remove-each",
        action="store_true",
        help="remove each instance's (and the floor's) directories once stopped, instead of with the store at the "
        "end; on ext4 without a journal the deleted inodes then slow every later file creation (see above)",
    )
    parser.add_argument("--concurrency", type=int, default=2, help="the worker's slots on the engine's queue")
    args = parser.parse_args()

    # A short store path: a server's Unix socket lives in its data directory (sun_path ≤ 107 bytes).
    store = Path(tempfile.mkdtemp(prefix="sqlrs-bench-", dir="/tmp"))
    store.chmod(0o711)  # the server user must traverse it
    scripts = store / "scripts"
    scripts.mkdir()
    os.environ["SQLRS_STATE_STORE"] = str(store)
    os.environ["SQLRS_SCRIPT_ROOTS"] = str(scripts)
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    params = None
    tracer = Tracer()
    try:
        params = server_params()  # django.setup(), with the settings above
        create_bench_databases(params)
        use_bench_databases()
        from jobs.dbstates.engine import images, statefs

        image = images.image_resolve(args.image)
        trace_engine(tracer)
        cached_script = scripts / "cached.sql"
        cached_script.write_text(script_text("cached", args.script))
        runs: dict[str, list[dict]] = {"cached": [], "cached floor": [], "uncached": [], "uncached floor": []}
        with engine_worker(args.concurrency):
            engine = Engine(params, args.image, tracer, remove=args.remove_each)
            try:
                first = engine.prepare(cached_script)  # initdb of the base, then the state: untimed
                state = statefs.state_dir(image.version, first["result"]["state_id"])
                base = statefs.base_dir(image.version)
                floor = Floor(image, store, remove=args.remove_each)
                describe(args, image, store, first, base, state)
                for number in range(-args.warmup, args.rounds):
                    script = scripts / f"round-{number + args.warmup}.sql"
                    script.write_text(script_text(f"round {number}", args.script))
                    steps = {
                        "cached": lambda: engine.prepare(cached_script),
                        "cached floor": lambda: floor.cached(state),
                        "uncached": lambda script=script: engine.prepare(script),
                        "uncached floor": lambda script=script: floor.uncached(base, script),
                    }
                    order = list(steps) if number % 2 == 0 else ["cached floor", "cached", "uncached floor", "uncached"]
                    for name in order:
                        figures = steps[name]()
                        if number >= 0:
                            runs[name].append(figures)
                    script.unlink()
                    if number >= 0 and (number + 1) % 10 == 0:
                        print(f"  {number + 1} rounds done")
                print(f"after the rounds: {create_cost_ms(store / 'instances'):.2f} ms to create a file in the store")
            finally:
                engine.close()
    finally:
        tracer.restore()
        stopped = servers_stop(store) if params is not None else 0
        if stopped:
            print(f"stopped {stopped} servers left in the store")
        subprocess.run(["rm", "-rf", str(store)], check=False)
        if params is not None:
            from django.db import connections

            connections.close_all()
            drop_bench_databases(params)

    print_summary(args, runs)
    traced = "median per phase; the traced engine calls, indented, summed per job"
    print_phases(f"where a cached prepare's time goes ({traced})", runs["cached"])
    print_phases("the cached floor (median per step)", runs["cached floor"])
    print_phases(f"where an uncached prepare's time goes ({traced})", runs["uncached"])
    print_phases("the uncached floor (median per step)", runs["uncached floor"])


if __name__ == "__main__":
    main()
