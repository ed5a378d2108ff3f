"""Faults production brings, against real runworker processes (short versions of bench/chaos.py):
backend kills under load, a killed LISTEN connection, a worker frozen past its lease. The
database restart is test_worker_processes.test_a_postgresql_restart_during_a_run_loses_no_job."""

import random
import signal
import threading
import time

from django.db import DatabaseError, connection, connections

from jobs.queue import services
from jobs.queue.models import Job, JobEvent, Worker
from jobs.runtime.names import worker_session_key
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, subprocess_database_env
from tests.e2e.conftest import runworker, status_counts, stop
from tests.helpers import wait_for

pytestmark = ALL_DATABASES_COMMITTED

OUTAGE_LINE = "database unavailable; retrying until it answers"


def job_spec(key: str, seconds: float = 0.01, **fields) -> services.JobSpec:
    return services.JobSpec(
        queue="default",
        task="test.sleep",
        args={"seconds": seconds, "key": key},  # distinct: retention keeps 100 identical finished jobs
        lock_key=key,
        idempotency_key=key,
        **fields,
    )


def enqueue_retrying(specs: list[services.JobSpec]) -> int:
    """What the manual tells a producer to do: a failed call is sent again, with the same keys.
    Returns how many calls failed."""
    failed = 0
    while True:
        try:
            services.job_enqueue_many(specs=specs)
            return failed
        except DatabaseError:
            failed += 1
            connections.close_all()
            time.sleep(0.05)


def kill_backends(*, seconds: float, every: float) -> int:
    """pg_terminate_backend on one of this test database's connections (but this thread's), at
    random, every ``every`` seconds for ``seconds``; returns how many were killed."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        (own,) = cursor.fetchone()
    killed, end = 0, time.monotonic() + seconds
    with raw_connection(autocommit=True) as conn:
        while time.monotonic() < end:
            pids = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND backend_type = 'client backend' AND pid NOT IN (pg_backend_pid(), %s)",
                [own],
            ).fetchall()
            if pids:
                killed += conn.execute("SELECT pg_terminate_backend(%s)", [random.choice(pids)[0]]).fetchone()[0]
            time.sleep(every)
    return killed


def done_events_per_job() -> dict:
    counts: dict = {}
    for job_id in JobEvent.objects.filter(kind="done").values_list("job_id", flat=True):
        counts[job_id] = counts.get(job_id, 0) + 1
    return counts


def test_backend_kills_under_load_lose_no_job_and_run_each_once_with_one_log_line():
    """Five kills a second among the worker's and the producer's connections while jobs stream in."""
    produced: list[int] = []

    def produce() -> None:
        try:
            for batch in range(40):
                produced.append(enqueue_retrying([job_spec(f"kill-{batch}-{n}") for n in range(10)]))
                time.sleep(0.1)
        finally:
            connections.close_all()

    with runworker("--queue", "default:4") as worker:
        wait_for(Worker.objects.exists, timeout=30, what="the worker to start")
        producer = threading.Thread(target=produce)
        producer.start()
        killed = kill_backends(seconds=4, every=0.2)
        producer.join()
        wait_for(lambda: status_counts().get("succeeded", 0) == 400, timeout=60, what="every job to succeed")
        assert worker.poll() is None  # it went on
        assert stop(worker) == 0
        output = worker.stdout.read()

    assert killed >= 10
    assert status_counts() == {"succeeded": 400}
    assert set(done_events_per_job().values()) == {1}  # each job finished exactly once
    assert output.count(OUTAGE_LINE) <= 1, output  # one episode, one line (or none: no kill hit it mid-use)
    assert "Traceback" not in output


def listener_pids(conn) -> list[int]:
    """The backends of the workers' LISTEN sessions: they hold the workers' session locks."""
    keys = [worker_session_key(worker_id) for worker_id in Worker.objects.values_list("worker_id", flat=True)]
    return [
        row[0]
        for row in conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND ((classid::bigint << 32) | objid::bigint) = ANY(%s)",
            [keys],
        )
    ]


def test_a_killed_listen_connection_is_replaced_at_once_and_pickup_does_not_wait_for_the_sweep():
    env = {**subprocess_database_env(), "DL_SWEEP_SEC": "60"}
    with runworker("--queue", "default:2", env=env) as worker, raw_connection(autocommit=True) as conn:
        wait_for(lambda: listener_pids(conn), timeout=30, what="the worker to listen")
        for round_number in range(3):
            (old_pid,) = listener_pids(conn)
            conn.execute("SELECT pg_terminate_backend(%s)", [old_pid])
            wait_for(
                lambda old=old_pid: listener_pids(conn) not in ([], [old]),
                timeout=5,
                what="a new LISTEN session",
            )
            (job,) = services.job_enqueue_many(specs=[job_spec(f"listen-{round_number}")])
            wait_for(
                lambda job_id=job.job_id: Job.objects.get(job_id=job_id).status == "succeeded",
                timeout=5,
                what="the job, through a notification (the sweep is 60 s away)",
            )
        assert stop(worker) == 0
        assert "Traceback" not in worker.stdout.read()


def test_a_worker_frozen_past_its_lease_is_fenced_and_the_job_has_one_outcome():
    """SIGSTOP past the lease: the job runs again elsewhere; after SIGCONT the frozen worker's
    heartbeat and outcome are refused, and it goes on serving."""
    (job,) = services.job_enqueue_many(specs=[job_spec("frozen", seconds=5, lease_ttl_sec=3)])
    slow_beats = {**subprocess_database_env(), "DL_HEARTBEAT_SEC": "0.5", "DL_REAPER_PERIOD_SEC": "60"}
    with runworker("--queue", "default:1", "--no-reaper", env=slow_beats) as frozen:
        wait_for(lambda: Job.objects.get(job_id=job.job_id).status == "running", timeout=30, what="the job to run")
        frozen.send_signal(signal.SIGSTOP)
        try:
            with runworker("--queue", "default:1") as rescuer:  # its reaper requeues the expired lease
                wait_for(
                    lambda: Job.objects.get(job_id=job.job_id).attempt == 2, timeout=30, what="the job to run again"
                )
                frozen.send_signal(signal.SIGCONT)
                wait_for(lambda: Job.objects.get(job_id=job.job_id).status == "succeeded", timeout=30, what="the rerun")
                time.sleep(1)  # the frozen worker's late outcome, if it were let through, is written by now
                assert stop(rescuer) == 0
        finally:
            frozen.send_signal(signal.SIGCONT)

        assert done_events_per_job() == {job.job_id: 1}
        (after,) = services.job_enqueue_many(specs=[job_spec("after-the-freeze")])
        wait_for(
            lambda: Job.objects.get(job_id=after.job_id).status == "succeeded",
            timeout=30,
            what="the once-frozen worker to serve again",
        )
        assert stop(frozen) == 0
        output = frozen.stdout.read()

    # Its late heartbeat was refused or, when the job's sleep ended while it was frozen, its late
    # outcome: which one comes first after SIGCONT depends on how long the freeze lasted.
    assert "job lease lost" in output, output
    assert "Traceback" not in output
