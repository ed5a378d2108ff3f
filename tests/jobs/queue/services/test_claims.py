"""Queue limits in the claim: the ordinary claim leaves limited queues alone, the limited claim
never starts more than the queue's budgets allow, also under concurrent claimers. A claim from a
floor reads the queue from there on, and under a held xmin walks only what was claimed since."""

import threading
import time

from django.db import connection, connections, transaction

from jobs.queue import services
from jobs.queue.models import Job, QueueStart
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


def claim_from(floor, count=10, queue="q"):
    return services.jobs_claim_from(queue=queue, limit=count, worker_id=WORKER, floor=floor)


def test_a_claim_from_a_floor_reads_from_there_on_and_says_where_its_window_began():
    first, second, third = (enqueue(queue="q", task="t").job_id for _ in range(3))
    assert claim_from(None, count=0) == services.Claim(jobs=[], window_head=head_of(first))  # claims none, reads

    from_second = claim_from(head_of(second), count=1)
    assert [job.lease.job_id for job in from_second.jobs] == [second]
    assert from_second.window_head == head_of(second)
    assert claim_from(head_of(third)).window_head == head_of(third)  # third claimed; first stays behind
    assert claim_from(head_of(third)) == services.Claim(jobs=[], window_head=None)  # nothing left from there

    from_head = claim_from(None)  # what a floor leaves behind, a claim from the head finds
    assert [job.lease.job_id for job in from_head.jobs] == [first] and from_head.window_head == head_of(first)


def head_of(job_id) -> services.ClaimFloor:
    job = Job.objects.get(job_id=job_id)
    return services.ClaimFloor(job.priority, job.created_at, job.job_id)


def index_entries_read(claim) -> int:
    """Entries of the claim-order index that ``claim()`` read (the session's counts not yet flushed,
    before and after, in one transaction: none are flushed inside it)."""
    read = "SELECT pg_stat_get_xact_tuples_returned('ix_dl_jobs_claim_order'::regclass)"
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(read)
        before = cursor.fetchone()[0]
        claim()
        cursor.execute(read)
        return cursor.fetchone()[0] - before


def test_under_a_held_xmin_a_claim_from_its_last_window_walks_only_what_was_claimed_since():
    specs = [services.JobSpec(queue="q", task="t", lock_key=f"k{n}") for n in range(2000)]
    services.job_enqueue_many(specs=specs)
    with raw_connection(autocommit=True) as holder:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute("SELECT txid_current(), count(*) FROM dl_jobs")  # an xid and a snapshot: vacuum keeps all
        floor = None
        for _ in range(19):  # 1,900 claimed: their queued entries stay in the index, none removable
            floor = claim_from(floor, count=100).window_head
        connection.cursor().execute("VACUUM dl_jobs")

        from_floor = index_entries_read(lambda: claim_from(floor, count=10))
        from_head = index_entries_read(lambda: claim_from(None, count=10))
        assert from_floor <= 150  # the last claim's 100 and the 10 this one takes (110 measured)
        assert from_head >= 1900  # every job claimed while the xmin was held (1,920 measured)
        holder.rollback()
