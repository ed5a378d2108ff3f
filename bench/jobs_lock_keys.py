"""Jobs that share lock_keys: per-key serialization (seed 002) at full speed.

    .venv/bin/python bench/jobs_lock_keys.py                 # 1,000 jobs of 5–15 ms over 10 keys, 2 runworkers × 8
    .venv/bin/python bench/jobs_lock_keys.py --runs 3 --jobs 300 --concurrency 4

Each run: a fresh queue of jobs.sleep jobs with seeded random durations, their lock_keys dealt
round-robin; the worker processes are started, and the run is timed from the first `picked`
event to the last finished_at. The ideal is the busiest key's total handler time or the total
handler time over all slots, whichever is larger. Target: wall ≤ 1.5 × ideal, and fewer than 1%
of claims lost to a lock_key race (each worker's counters, read from its --metrics-port). Every
run also checks that no two jobs of one key overlapped (picked → finished, database clock).
"""

import argparse
import random
import statistics
import subprocess
import time
import urllib.request
from contextlib import ExitStack

from common import (
    PYTHON,
    ROOT,
    create_bench_databases,
    drop_bench_databases,
    free_port,
    print_table,
    server_params,
    stop,
    use_bench_databases,
)
from jobs_queue import control_db, reset_jobs, vacuum_analyze

QUEUE = "bench"
TARGET_RATIO = 1.5
TARGET_RACE_SHARE = 0.01


def enqueue(args, seed: int) -> dict[str, float]:
    """The jobs, one statement; return each key's total handler seconds."""
    from jobs.queue import services

    rng = random.Random(seed)
    durations = [rng.uniform(args.min_ms, args.max_ms) / 1000 for _ in range(args.jobs)]
    specs = [
        services.JobSpec(
            queue=QUEUE, task="jobs.sleep", lock_key=f"key-{i % args.keys}", args={"seconds": seconds, "chunk": 60}
        )
        for i, seconds in enumerate(durations)
    ]
    services.job_enqueue_many(specs=specs)
    per_key: dict[str, float] = {}
    for spec, seconds in zip(specs, durations, strict=True):
        per_key[spec.lock_key] = per_key.get(spec.lock_key, 0.0) + seconds
    return per_key


def counters(port: int) -> tuple[float, float]:
    """(claimed, claim races) of one worker, from its own /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()

    def total(name: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))

    return total("dl_jobs_claimed_total"), total("dl_jobs_claim_races_total")


def overlaps(conn) -> int:
    """Jobs of one key picked before the previous one's end was written.

    Event ids, not timestamps: now() is when a statement's transaction began, which can be
    before the snapshot in which it saw the previous job finished.
    """
    return conn.execute(
        """
        WITH runs AS (
            SELECT j.lock_key, p.event_id AS picked, d.event_id AS ended,
                   lead(p.event_id) OVER (PARTITION BY j.lock_key ORDER BY p.event_id) AS next_picked
            FROM dl_jobs j
            JOIN dl_job_events p ON p.job_id = j.job_id AND p.kind = 'picked'
            JOIN dl_job_events d ON d.job_id = j.job_id AND d.kind = 'done'
        )
        SELECT count(*) FROM runs WHERE next_picked < ended
        """
    ).fetchone()[0]


def run_once(params: dict, env: dict, args, seed: int) -> dict:
    reset_jobs(params)
    per_key = enqueue(args, seed)
    vacuum_analyze(params)
    ports = [free_port() for _ in range(args.workers)]
    with ExitStack() as stack, control_db(params) as conn:
        workers = [
            stack.enter_context(
                subprocess.Popen(
                    [
                        PYTHON,
                        "manage.py",
                        "runworker",
                        "--queue",
                        f"{QUEUE}:{args.concurrency}",
                        "--metrics-port",
                        str(port),
                    ],
                    cwd=ROOT,
                    env=env,
                )
            )
            for port in ports
        ]
        deadline = time.monotonic() + 600
        while conn.execute("SELECT count(*) FROM dl_jobs WHERE status <> 'succeeded'").fetchone()[0]:
            if time.monotonic() > deadline or any(worker.poll() is not None for worker in workers):
                raise RuntimeError("the jobs did not all succeed")
            time.sleep(0.05)
        claimed, races = map(sum, zip(*(counters(port) for port in ports), strict=True))
        for worker in workers:
            stop(worker)
        wall = conn.execute(
            "SELECT extract(epoch FROM (SELECT max(finished_at) FROM dl_jobs) - "
            "(SELECT min(ts) FROM dl_job_events WHERE kind = 'picked'))"
        ).fetchone()[0]
        overlapping = overlaps(conn)
        requeues = conn.execute("SELECT count(*) FROM dl_job_events WHERE kind = 'requeue'").fetchone()[0]
    slots = args.workers * args.concurrency
    ideal = max(*per_key.values(), sum(per_key.values()) / slots)
    return {
        "wall": float(wall),
        "ideal": ideal,
        "work": sum(per_key.values()),
        "claims": claimed + races,
        "races": races,
        "overlaps": overlapping,
        "requeues": requeues,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--keys", type=int, default=10)
    parser.add_argument("--min-ms", type=float, default=5)
    parser.add_argument("--max-ms", type=float, default=15)
    parser.add_argument("--workers", type=int, default=2, help="runworker processes")
    parser.add_argument("--concurrency", type=int, default=8, help="slots per process")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    params = server_params()
    env = create_bench_databases(params)
    try:
        use_bench_databases()
        results = [run_once(params, env, args, seed) for seed in range(args.runs)]
    finally:
        drop_bench_databases(params)
    rows = []
    for seed, result in enumerate(results):
        ratio = result["wall"] / result["ideal"]
        race_share = result["races"] / max(1, result["claims"])
        rows.append(
            (
                f"run {seed + 1}",
                f"wall {result['wall']:6.2f} s",
                f"ideal {result['ideal']:5.2f} s (work {result['work']:.1f} s)",
                f"ratio {ratio:4.2f} (≤ {TARGET_RATIO}: {'PASS' if ratio <= TARGET_RATIO else 'FAIL'})",
                f"races {result['races']:.0f} of {result['claims']:.0f} claims = {race_share:.2%} "
                f"(< {TARGET_RACE_SHARE:.0%}: {'PASS' if race_share < TARGET_RACE_SHARE else 'FAIL'})",
                f"overlaps {result['overlaps']}, requeue events {result['requeues']}",
            )
        )
    median_ratio = statistics.median(result["wall"] / result["ideal"] for result in results)
    print_table(
        f"{args.jobs:,} jobs of {args.min_ms:g}–{args.max_ms:g} ms over {args.keys} lock_keys, "
        f"{args.workers} runworker × {args.concurrency}; median ratio {median_ratio:.2f}",
        rows,
    )


if __name__ == "__main__":
    main()
