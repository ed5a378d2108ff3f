"""runworker as real processes: kill -9, a PostgreSQL restart, two processes on shared lock keys."""

import itertools
import json
import random
import signal
import time
import urllib.request

import psycopg
import pytest

from jobs.queue import services
from jobs.queue.models import Job, JobEvent, Worker
from pipeline_project.db import embedded as embedded_postgres
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, subprocess_database_env
from tests.e2e.conftest import manage, runworker, status_counts, stop
from tests.helpers import free_port, wait_for

pytestmark = ALL_DATABASES_COMMITTED


def enqueue_many(count: int, *, task="test.sleep", args=None, lock_key=lambda i: f"job-{i}", **fields):
    return services.job_enqueue_many(
        specs=[
            services.JobSpec(queue="default", task=task, args=args or {}, lock_key=lock_key(i), **fields)
            for i in range(count)
        ]
    )


def all_succeeded(count: int, params=None):
    return status_counts(params).get("succeeded", 0) == count


def test_kill_9_with_jobs_in_flight_loses_nothing():
    enqueue_many(40, args={"seconds": 0.3}, lease_ttl_sec=3)

    with runworker("--queue", "default:4") as doomed:
        wait_for(lambda: status_counts().get("succeeded", 0) >= 4, timeout=30, what="some progress")
        wait_for(lambda: status_counts().get("running", 0) > 0, timeout=10, what="jobs in flight")
        doomed.kill()  # SIGKILL: no goodbye, leases and the worker row stay behind
        doomed.wait()
    orphaned = set(Job.objects.filter(status="running").values_list("job_id", flat=True))
    assert orphaned
    dead_worker = Worker.objects.get()

    with runworker("--queue", "default:4"):
        wait_for(lambda: all_succeeded(40), timeout=60, what="every job to succeed")
        wait_for(
            lambda: not Worker.objects.filter(worker_id=dead_worker.worker_id).exists(),
            timeout=10,
            what="the dead worker to be forgotten",
        )

    assert status_counts() == {"succeeded": 40}
    for job_id in orphaned:
        reasons = [event.payload.get("reason") for event in JobEvent.objects.filter(job_id=job_id, kind="requeue")]
        assert {"worker_gone", "lease_expired"} & set(reasons)  # found gone, or its lease ran out first
        assert Job.objects.get(job_id=job_id).attempt == 2


RERUN_WITHIN_SEC = 40  # a killed worker's job runs again within this (its silence counts from 100 s)


def test_a_killed_worker_s_job_runs_again_long_before_its_lease_ends():
    """Found by its listening session, gone with its process: neither its lease (10 minutes) nor
    its silence (forgotten after 10 heartbeats, 100 s here) is waited for. Alone it takes a few
    seconds; RERUN_WITHIN_SEC leaves room for the next worker's start on cores the suite shares
    (a loaded run took over 15 s, on the code before and after the queue's worker was split),
    and is still far below the silence's 100 s."""
    (job,) = enqueue_many(1, args={"seconds": 120}, lease_ttl_sec=600)
    env = {**subprocess_database_env(), "DL_HEARTBEAT_SEC": "10"}

    with runworker("--queue", "default:1", env=env) as doomed:
        wait_for(lambda: status_counts().get("running") == 1, timeout=30, what="the job to run")
        doomed.kill()
        killed_at = time.monotonic()
        doomed.wait()
    with runworker("--queue", "default:1", env=env):
        wait_for(
            lambda: Job.objects.get(job_id=job.job_id).attempt == 2,
            timeout=RERUN_WITHIN_SEC,
            what="the job to run again",
        )
        rerun_after = time.monotonic() - killed_at
        assert Job.objects.get(job_id=job.job_id).status == "running"
        requeues = JobEvent.objects.filter(job_id=job.job_id, kind="requeue")
        assert [event.payload["reason"] for event in requeues] == ["worker_gone"]  # not lease_expired

    assert rerun_after < RERUN_WITHIN_SEC, rerun_after
    assert not Worker.objects.filter(pid=doomed.pid).exists()  # the dead worker is forgotten with it


def test_a_postgresql_restart_during_a_run_loses_no_job(private_postgres):
    env, params, data_dir = private_postgres
    seeding = manage(
        "shell",
        "-c",
        "from jobs.queue import services; services.job_enqueue_many(specs=[services.JobSpec(queue='default', "
        "task='test.sleep', args={'seconds': 0.02}, lock_key=f'k{i}') for i in range(300)])",
        env=env,
    )
    assert seeding.wait(timeout=60) == 0, seeding.stdout.read()

    with runworker("--queue", "default:4", env=env) as worker:
        wait_for(
            lambda: status_counts(params).get("succeeded", 0) >= 30, timeout=30, what="progress before the restart"
        )
        embedded_postgres.pg_ctl("-w", "-m", "fast", "restart", data_dir=data_dir)
        wait_for(lambda: all_succeeded(300, params), timeout=90, what="every job after the restart")
        assert stop(worker) == 0
        output = worker.stdout.read()

    assert "database unavailable; retrying" in output  # it noticed, and went on
    with psycopg.connect(**params) as conn:
        done_events = conn.execute("SELECT count(*) FROM dl_job_events WHERE kind = 'done'").fetchone()[0]
    assert status_counts(params) == {"succeeded": 300}
    assert done_events == 300  # each job finished exactly once


def run_spans(job_ids) -> dict[str, list[tuple[float, float]]]:
    """Each lock_key's runs (started, ended) among ``job_ids``, in order, from their done events."""
    lock_keys = dict(Job.objects.filter(job_id__in=job_ids).values_list("job_id", "lock_key"))
    runs: dict[str, list[tuple[float, float]]] = {}
    for job_id, payload in JobEvent.objects.filter(kind="done", job_id__in=job_ids).values_list("job_id", "payload"):
        runs.setdefault(lock_keys[job_id], []).append((payload["result"]["started"], payload["result"]["ended"]))
    return {key: sorted(intervals) for key, intervals in runs.items()}


def makespan(runs: dict[str, list[tuple[float, float]]]) -> float:
    return max(end for intervals in runs.values() for _, end in intervals) - min(
        start for intervals in runs.values() for start, _ in intervals
    )


def test_two_processes_run_shared_lock_keys_one_at_a_time_at_nearly_full_speed():
    # The lock-key workload of bench/jobs_lock_keys.py, smaller: 800 jobs of 5–15 ms over 10 keys,
    # timed against the same jobs on 800 distinct keys, run by the same workers just before.
    rng = random.Random(7)
    seconds = [rng.uniform(0.005, 0.015) for _ in range(800)]

    def enqueue_and_drain(lock_key) -> list:
        enqueued = services.job_enqueue_many(
            specs=[
                services.JobSpec(queue="default", task="test.sleep", args={"seconds": s}, lock_key=lock_key(i))
                for i, s in enumerate(seconds)
            ]
        )
        job_ids = [e.job_id for e in enqueued]
        wait_for(
            lambda: Job.objects.filter(job_id__in=job_ids, status="succeeded").count() == len(job_ids),
            timeout=180,
            interval=0.1,
            what="800 jobs",
        )
        return job_ids

    with runworker("--queue", "default:4"), runworker("--queue", "default:4"):
        wait_for(lambda: Worker.objects.count() == 2, timeout=60, what="both workers to be up")
        unkeyed = run_spans(enqueue_and_drain(lambda i: f"alone-{i}"))
        keyed_ids = enqueue_and_drain(lambda i: f"key-{i % 10}")

    runs = run_spans(keyed_ids)
    for key, intervals in runs.items():
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(intervals)), f"{key} overlapped"
    workers = {
        payload["worker"].rsplit(":", 1)[0]
        for payload in JobEvent.objects.filter(kind="picked", job_id__in=keyed_ids).values_list("payload", flat=True)
    }
    assert len(workers) == 2  # both processes did work
    assert set(Job.objects.values_list("attempt", flat=True)) == {1}  # waiting spends no attempt
    assert not JobEvent.objects.filter(kind="requeue").exists()  # and writes nothing
    # Each key's 80 jobs run one after another, each waiting for its predecessor's end to be
    # written: the bound is relative to the same jobs without shared keys on the same machine
    # in the same run (CI machines differ in speed by 2x and more). The benchmark holds the
    # absolute target (1.5x the ideal) on a quiet machine.
    per_key = {key: sum(s for i, s in enumerate(seconds) if f"key-{i % 10}" == key) for key in runs}
    ideal = max(*per_key.values(), sum(seconds) / 8)
    assert makespan(runs) <= max(2.5 * makespan(unkeyed), 1.5 * ideal), (
        f"{makespan(runs):.2f} s on 10 keys, {makespan(unkeyed):.2f} s on distinct keys, ideal {ideal:.2f} s"
    )


def test_sigterm_lets_the_running_job_finish_and_exits_0():
    [enqueued] = enqueue_many(1, args={"seconds": 1.0})

    with runworker("--queue", "default:1") as worker:
        wait_for(
            lambda: Job.objects.get(job_id=enqueued.job_id).status == "running", timeout=30, what="the job to start"
        )
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0

    assert Job.objects.get(job_id=enqueued.job_id).status == "succeeded"
    assert not Worker.objects.exists()  # it deregistered


def test_sigterm_releases_jobs_that_outlast_the_shutdown_timeout():
    [enqueued] = enqueue_many(1, args={"seconds": 60})

    with runworker("--queue", "default:1", "--shutdown-timeout", "2") as worker:
        wait_for(
            lambda: Job.objects.get(job_id=enqueued.job_id).status == "running", timeout=30, what="the job to start"
        )
        started = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=15) == 0
        assert time.monotonic() - started < 10  # the 2-s timeout and the exit, not the job's 60 s (5.03 s on a busy CI)

    job = Job.objects.get(job_id=enqueued.job_id)
    assert job.status == "queued" and job.attempt == 0  # a shutdown spends no attempt
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload["reason"] == "worker_shutdown"


# A runworker (its control loop and periodic tasks) and a runreaper, each seen at work first.
STOPPED_WITH_THE_DATABASE_DOWN = {
    "runworker": (["runworker", "--handlers", "tests.jobs.handlers", "--queue", "default:2"], "dl_workers"),
    "runreaper": (["runreaper"], "dl_periodic_tasks WHERE last_runner LIKE '%:reaper'"),
}


@pytest.mark.parametrize("command", STOPPED_WITH_THE_DATABASE_DOWN)
def test_a_process_stopped_while_its_database_is_down_exits_within_its_shutdown_timeout(private_postgres, command):
    env, params, data_dir = private_postgres
    args, at_work = STOPPED_WITH_THE_DATABASE_DOWN[command]
    shutdown_timeout = 5  # FAST_ENV's; the pool's own timeout is 30 s
    process = manage(*args, env=env)
    try:
        wait_for(lambda: rows(params, at_work), timeout=30, what=f"{command} at work")
        embedded_postgres.pg_ctl("-w", "-m", "fast", "stop", data_dir=data_dir)
        try:
            time.sleep(2)  # its loop and its periodic tasks wait for a connection now
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            code = process.wait(timeout=60)
            took = time.monotonic() - started
        finally:
            embedded_postgres.pg_ctl("-w", "restart", data_dir=data_dir)
    finally:
        stop(process)
    output = process.stdout.read()

    assert code == 0 and took < shutdown_timeout, (code, took, output[-3000:])
    assert "Traceback" not in output, output[-3000:]


def rows(params: dict, table: str) -> int:
    with psycopg.connect(**params) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_runworker_serves_its_own_metrics():
    enqueue_many(5, task="test.echo")
    port = free_port()

    with runworker("--queue", "default:2", "--metrics-port", str(port)):
        wait_for(lambda: all_succeeded(5), timeout=30, what="the jobs")

        def scrape():
            try:
                return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            except OSError:
                return ""

        text = wait_for(
            lambda: 'dl_jobs_succeeded_total{queue="default",task="test.echo"} 5.0' in (page := scrape()) and page,
            timeout=10,
            what="metrics",
        )

    assert 'dl_jobs_claimed_total{queue="default"} 5.0' in text
    assert "dl_job_processing_seconds_bucket" in text


def test_workers_json_configures_the_queues():
    enqueue_many(3, task="test.echo")
    env = {**subprocess_database_env(), "WORKERS_JSON": json.dumps([{"queue": "default", "concurrency": 2}])}

    process = manage("runworker", "--handlers", "tests.jobs.handlers", env=env)
    try:
        wait_for(lambda: all_succeeded(3), timeout=30, what="the jobs")
        registered = wait_for(Worker.objects.first, what="registration")
        assert registered.queues == {"default": 2}
    finally:
        assert stop(process) == 0


def test_bad_configuration_fails_fast_with_a_clear_message():
    process = manage(
        "runworker", env={**subprocess_database_env(), "WORKERS_JSON": '[{"queue": "q", "concurrency": 0}]'}
    )
    output, _ = process.communicate(timeout=60)

    assert process.returncode != 0
    assert "WORKERS_JSON: concurrency must be an integer from 1 to 1000" in output


def test_bad_queue_flags_fail_fast_with_a_clear_message():
    process = manage("runworker", "--queue", "default:2", "--queue", "a:00")
    output, _ = process.communicate(timeout=60)

    assert process.returncode != 0
    assert "--queue: concurrency must be an integer from 1 to 1000" in output


def test_runreaper_requeues_expired_leases_and_stops_on_sigterm():
    [enqueued] = enqueue_many(1, task="test.echo")
    services.jobs_claim(queue="default", limit=1, worker_id="gone")
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at="2000-01-01T00:00:00Z")

    reaper = manage("runreaper")
    try:
        wait_for(lambda: Job.objects.get(job_id=enqueued.job_id).status == "queued", timeout=30, what="the reaper")
    finally:
        assert stop(reaper) == 0


def test_web_metrics_sum_the_worker_counters_in_multiprocess_mode(api, tmp_path, monkeypatch):
    enqueue_many(4, task="test.echo")
    env = {**subprocess_database_env(), "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}

    with runworker("--queue", "default:2", env=env):
        wait_for(lambda: all_succeeded(4), timeout=30, what="the jobs")
        monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
        text = wait_for(
            lambda: (
                'dl_jobs_succeeded_total{queue="default",task="test.echo"} 4.0'
                in (page := api.get("/metrics").content.decode())
                and page
            ),
            timeout=10,
            what="the worker's counters on /metrics",
        )

    assert 'dl_jobs_claimed_total{queue="default"} 4.0' in text
    assert 'dl_queue_depth{queue="default",status="succeeded"} 4.0' in text


def test_64_slots_querying_the_database_hold_at_most_the_pool_and_the_listener():
    """Every slot's handler holds a connection while it runs; the worker's connections stay
    within DB_POOL_SIZE plus its LISTEN connection, counted from pg_stat_activity, and the
    handlers that waited for one show in the pool's wait metric."""
    pool_size, application = 6, "pool-bound-test"
    enqueue_many(256, task="test.query", args={"seconds": 0.1})
    port = free_port()
    env = {**subprocess_database_env(), "DB_POOL_SIZE": str(pool_size), "DB_APPLICATION_NAME": application}
    held = []

    with (
        raw_connection(autocommit=True) as observer,
        # No housekeeping: retention would prune some of the 256 identical jobs before they are counted.
        runworker("--queue", "default:64", "--metrics-port", str(port), "--no-reaper", env=env),
    ):

        def sample():
            (count,) = observer.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND datname = current_database()",
                [application],
            ).fetchone()
            held.append(count)
            return all_succeeded(256)

        wait_for(sample, timeout=90, interval=0.02, what="every job")
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()

    assert max(held) <= pool_size + 1, held
    assert max(held) == pool_size + 1  # all slots were busy: the pool was used up, not merely big enough
    waits = {
        line.split('le="')[1].split('"')[0]: float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith('db_pool_wait_seconds_bucket{database="default"')
    }
    assert waits["+Inf"] >= 256  # each run borrowed a connection and gave it back
    assert waits["+Inf"] - waits["0.01"] > 0  # some waited for one
    backends = {event.payload["result"]["backend"] for event in JobEvent.objects.filter(kind="done")}
    assert len(backends) <= pool_size
