"""The depth of jobs claimable now (``selectors.claimable_depths``, ``dl_queue_claimable_jobs``): what
a claim would take at once, not what waits for a delay, a backoff, other jobs, a busy lock_key, a
pause or a limit. Each count is checked against what the claim itself then takes."""

from datetime import timedelta

from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.services.outcomes import Outcome
from tests.conftest import ALL_DATABASES
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES

WORKER = "test-worker"


def claimable(queue: str) -> int:
    return selectors.claimable_depths().get(queue, 0)


def claim(queue: str, *, limited: bool = False) -> set:
    claimer = services.jobs_claim_limited if limited else services.jobs_claim
    return {job.lease.job_id for job in claimer(queue=queue, limit=100, worker_id=WORKER)}


def succeed(job) -> None:
    services.jobs_complete(outcomes=[Outcome(lease=job.lease, kind="succeeded")], worker_id=WORKER)


def test_due_jobs_count_and_delayed_or_backing_off_ones_do_not():
    enqueue(queue="q", task="t", max_attempts=3)
    [run] = services.jobs_claim(queue="q", limit=1, worker_id=WORKER)
    error = Outcome(lease=run.lease, kind="error", error="boom", retry_delay_sec=600)
    assert services.jobs_complete(outcomes=[error], worker_id=WORKER) == {run.lease.job_id: "queued"}
    enqueue(queue="q", task="t", available_at=timezone.now() + timedelta(hours=1))
    due = {enqueue(queue="q", task="t").job_id for _ in range(3)}

    assert claimable("q") == 3
    assert claim("q") == due
    assert claimable("q") == 0


def test_a_job_waiting_for_another_counts_once_that_one_succeeded():
    upstream = enqueue(queue="upstream", task="t")
    waiting = enqueue(queue="q", task="t", depends_on=[upstream.job_id]).job_id
    assert claimable("q") == 0
    assert claimable("upstream") == 1

    [run] = services.jobs_claim(queue="upstream", limit=1, worker_id=WORKER)
    assert claimable("q") == 0  # still running
    succeed(run)

    assert claimable("q") == 1
    assert claim("q") == {waiting}


def test_a_paused_queue_has_none():
    for _ in range(3):
        enqueue(queue="q", task="t")
    services.queue_pause(queue="q", by="test", create=True)
    enqueue(queue="other", task="t")

    assert claimable("q") == 0
    assert claim("q") == set()
    assert claimable("other") == 1

    services.queue_resume(queue="q", by="test")
    assert claimable("q") == 3


def test_a_concurrency_limit_caps_the_count_at_its_free_slots():
    services.queue_limits_set(queue="q", max_running=5, by="test", create=True)
    for _ in range(3):
        enqueue(queue="q", task="t")
    assert len(claim("q", limited=True)) == 3
    for _ in range(10):
        enqueue(queue="q", task="t")

    assert claimable("q") == 2  # min(10 due, 5 - 3 running)
    assert len(claim("q", limited=True)) == 2
    assert claimable("q") == 0


def test_a_rate_limit_caps_the_count_at_the_starts_left_in_its_period():
    services.queue_limits_set(queue="q", rate_limit=4, rate_period_sec=3600, by="test", create=True)
    for _ in range(3):
        enqueue(queue="q", task="t")
    assert len(claim("q", limited=True)) == 3
    for _ in range(5):
        enqueue(queue="q", task="t")

    assert claimable("q") == 1
    assert len(claim("q", limited=True)) == 1


def test_limits_per_partition_cap_each_partition_apart():
    services.queue_limits_set(queue="q", max_running=2, per_partition=True, by="test", create=True)
    for _ in range(2):
        enqueue(queue="q", task="t", partition_key="a")
    assert len(claim("q", limited=True)) == 2
    for partition, jobs in (("a", 3), ("b", 5)):
        for _ in range(jobs):
            enqueue(queue="q", task="t", partition_key=partition)

    assert claimable("q") == 2  # a: its 2 slots taken; b: 2 of its 5
    assert len(claim("q", limited=True)) == 2


def test_jobs_of_a_busy_lock_key_do_not_count_and_a_free_key_counts_once():
    enqueue(queue="q", task="t", lock_key="busy")
    enqueue(queue="elsewhere", task="t", lock_key="busy-elsewhere")
    assert len(claim("q")) == 1 and len(claim("elsewhere")) == 1  # both keys run now
    for key in ("busy", "busy", "busy-elsewhere"):
        enqueue(queue="q", task="t", lock_key=key)
    first_of_free_key = enqueue(queue="q", task="t", lock_key="free").job_id
    for _ in range(2):
        enqueue(queue="q", task="t", lock_key="free")
    alone = enqueue(queue="q", task="t").job_id

    assert claimable("q") == 2  # the first of "free" (its others wait for it), and the job of its own key
    assert claim("q") == {first_of_free_key, alone}
    assert claimable("q") == 0


def test_a_key_whose_first_job_is_not_due_holds_back_the_due_ones_behind_it():
    enqueue(queue="q", task="t", lock_key="k", priority=1, available_at=timezone.now() + timedelta(hours=1))
    enqueue(queue="q", task="t", lock_key="k", priority=5)

    assert claimable("q") == 0
    assert claim("q") == set()


def test_queues_without_claimable_jobs_report_zero():
    enqueue(queue="later", task="t", available_at=timezone.now() + timedelta(hours=1))
    services.queue_limits_set(queue="limited-and-empty", max_running=3, by="test", create=True)

    depths = selectors.claimable_depths()

    assert depths["later"] == 0 and depths["limited-and-empty"] == 0


def test_metrics_endpoint_serves_the_claimable_depth(api):
    for _ in range(3):
        enqueue(queue="reports", task="t")
    enqueue(queue="reports", task="t", available_at=timezone.now() + timedelta(hours=1))
    services.queue_pause(queue="paused", by="test", create=True)
    enqueue(queue="paused", task="t")

    text = api.get("/metrics").content.decode()

    assert "# TYPE dl_queue_claimable_jobs gauge" in text
    assert 'dl_queue_claimable_jobs{queue="reports"} 3.0' in text
    assert 'dl_queue_claimable_jobs{queue="paused"} 0.0' in text
    assert 'dl_queue_depth{queue="reports",status="queued"} 4.0' in text
