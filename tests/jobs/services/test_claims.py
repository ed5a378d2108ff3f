"""Queue limits in the claim: the ordinary claim leaves limited queues alone, the limited claim
never starts more than the queue's budgets allow, also under concurrent claimers."""

import threading
import time

from django.db import connections

from jobs import services
from jobs.models import Job, QueueStart
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection, run_in_threads
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES_COMMITTED

WORKER = "test-worker"


def limit(queue="q", *, max_running=None, rate=None, per_partition=False):
    rate_limit, period = rate or (None, None)
    return services.queue_limits_set(
        queue=queue,
        max_running=max_running,
        rate_limit=rate_limit,
        rate_period_sec=period,
        per_partition=per_partition,
        by="test",
    )


def claim(queue="q", count=10):
    return services.jobs_claim_limited(queue=queue, limit=count, worker_id=WORKER)


def finish(jobs):
    Job.objects.filter(job_id__in=[job.lease.job_id for job in jobs]).update(status="succeeded")


def test_the_ordinary_claim_takes_nothing_from_a_limited_queue():
    for _ in range(3):
        enqueue(queue="q", task="t")
    limit(max_running=5)
    assert services.jobs_claim(queue="q", limit=10, worker_id=WORKER) == []
    limit()  # cleared: the ordinary claim takes them again
    assert len(services.jobs_claim(queue="q", limit=10, worker_id=WORKER)) == 3


def test_max_running_caps_the_queue_and_frees_as_jobs_end():
    for _ in range(10):
        enqueue(queue="q", task="t")
    limit(max_running=3)
    first = claim()
    assert len(first) == 3
    assert claim() == []
    finish(first[:2])
    assert len(claim()) == 2
    assert Job.objects.filter(queue="q", status="running").count() == 3


def test_a_queue_without_limits_gets_the_ordinary_claim():
    for _ in range(4):
        enqueue(queue="plain", task="t")
    assert len(claim(queue="plain")) == 4


def test_a_paused_limited_queue_gives_nothing():
    enqueue(queue="q", task="t")
    limit(max_running=3)
    services.queue_pause(queue="q", by="test")
    assert claim() == []


def test_lock_keys_still_run_one_at_a_time_in_order():
    for _ in range(3):
        enqueue(queue="q", task="t", lock_key="same")
    other = enqueue(queue="q", task="t", lock_key="other")
    limit(max_running=5)
    claimed = claim()
    assert len(claimed) == 2 and claimed[1].lease.job_id == other.job_id
    assert claimed[0].lock_key == "same" and claimed[0].has_successor


def test_max_running_per_partition():
    for partition in ("a", "a", "a", "b", "b", "c"):
        enqueue(queue="q", task="t", partition_key=partition)
    limit(max_running=2, per_partition=True)
    claimed = claim()
    assert sorted(job.partition_key for job in claimed) == ["a", "a", "b", "b", "c"]
    assert claim() == []


def test_rate_limit_counts_starts_in_the_period():
    for _ in range(10):
        enqueue(queue="q", task="t")
    limit(rate=(4, 1))
    first = claim()
    assert len(first) == 4
    finish(first)
    assert claim() == []  # ended, but started within the period
    time.sleep(1.05)
    second = claim()
    assert len(second) == 4
    finish(second)
    time.sleep(1.05)
    assert len(claim()) == 2
    assert QueueStart.objects.filter(queue="q").count() == 6  # starts two periods old are pruned


def test_rate_limit_per_partition():
    for partition in "aaabbb":
        enqueue(queue="q", task="t", partition_key=partition)
    limit(rate=(2, 60), per_partition=True)
    claimed = claim()
    finish(claimed)
    assert sorted(job.partition_key for job in claimed) == ["a", "a", "b", "b"]
    assert claim() == []


def test_both_limits_the_tighter_one_wins():
    for _ in range(10):
        enqueue(queue="q", task="t")
    limit(max_running=5, rate=(2, 60))
    assert len(claim()) == 2


def test_clearing_the_rate_forgets_its_starts():
    enqueue(queue="q", task="t")
    limit(rate=(5, 60))
    assert len(claim()) == 1
    limit(max_running=5)
    assert not QueueStart.objects.exists()


def test_concurrent_claimers_never_overshoot():
    """16 threads claim batches of 8 from a queue limited to 3 (each giving its pooled connection
    back between claims, so all take turns) while a producer adds jobs that go first (so claimers'
    snapshots disagree on which jobs come first); a connection of its own samples the running count."""
    services.job_enqueue_many(specs=[services.JobSpec(queue="q", task="t", lock_key=f"k{n}") for n in range(300)])
    limit(max_running=3)
    samples, stop = [], threading.Event()

    def run(index):
        if index == 0:
            with raw_connection("default", autocommit=True) as conn:
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    count = conn.execute("SELECT count(*) FROM dl_jobs WHERE queue = 'q' AND status = 'running'")
                    samples.append(count.fetchone()[0])
            stop.set()
            return
        if index == 1:
            for priority in range(1000, 0, -1):
                if stop.is_set():
                    break
                services.job_enqueue(
                    spec=services.JobSpec(queue="q", task="t", lock_key=f"p{priority}", priority=priority)
                )
            return
        while not stop.is_set():
            jobs = claim(count=8)
            time.sleep(0.002)
            finish(jobs)
            connections.close_all()

    run_in_threads(18, run)
    assert max(samples) == 3
    assert Job.objects.filter(status="succeeded").count() > 30
