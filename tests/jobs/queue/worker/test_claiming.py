"""Claiming into a worker's lanes (``jobs.queue.worker.claiming``): jobs claimed ahead of the free
slots while runs are short, never in a limited queue or after long runs."""

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.conftest import enqueue, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED

CONCURRENCY = 2


def learn_short_runs() -> None:
    """A few quick runs, so that the lane knows its runs end fast."""
    for warm in [enqueue(task="test.echo") for _ in range(4)]:
        wait_for_status(warm.job_id, "succeeded")


def slot_waits(jobs) -> list[float]:
    """How long each job waited between its claim (its started_at) and its handler's start: a job
    claimed ahead waits for a slot, one claimed into a free slot starts at once."""
    waits = []
    for item in jobs:
        done = JobEvent.objects.get(job_id=item.job_id, kind="done")
        waits.append(done.payload["result"]["started"] - Job.objects.get(job_id=item.job_id).started_at.timestamp())
    return waits


def all_succeeded(jobs) -> None:
    wait_for(
        lambda: Job.objects.filter(job_id__in=[item.job_id for item in jobs], status="succeeded").count() == len(jobs),
        timeout=20,
        what="every job run",
    )


def test_a_lane_of_short_runs_claims_ahead_and_runs_each_job_once():
    # Runs under 5 s count as short here: the jobs held ahead stay visible long enough to be seen.
    with running_worker(queues={"default": CONCURRENCY}, claim_ahead_run_sec=5.0):
        learn_short_runs()
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.3}) for _ in range(6)]
        wait_for(lambda: Job.objects.filter(status="running").count() == len(jobs), what="all claimed at once")
        all_succeeded(jobs)

    assert max(slot_waits(jobs)) > 0.25  # held ahead while a run of 0.3 s went on
    for item in jobs:
        events = JobEvent.objects.filter(job_id=item.job_id).exclude(kind="heartbeat").order_by("event_id")
        assert list(events.values_list("kind", flat=True)) == ["queued", "picked", "done"]


def test_long_runs_are_not_claimed_ahead():
    with running_worker(queues={"default": CONCURRENCY}):  # the default: ahead while runs take under 5 ms
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.1}) for _ in range(8)]
        all_succeeded(jobs)

    assert max(slot_waits(jobs)) < 0.08  # each claimed into a free slot, none behind a run


def test_nothing_is_claimed_ahead_when_it_is_switched_off():
    with running_worker(queues={"default": CONCURRENCY}, claim_ahead_run_sec=0):
        learn_short_runs()
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.1}) for _ in range(6)]
        all_succeeded(jobs)

    assert max(slot_waits(jobs)) < 0.08


def test_a_limited_queue_is_never_claimed_ahead():
    with running_worker(queues={"default": CONCURRENCY}, claim_ahead_run_sec=5.0):
        learn_short_runs()
        services.queue_limits_set(queue="default", by="test", max_running=CONCURRENCY)
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.1}) for _ in range(6)]
        all_succeeded(jobs)

    assert max(slot_waits(jobs)) < 0.08


def test_jobs_held_ahead_still_run_when_the_worker_stops():
    with running_worker(queues={"default": CONCURRENCY}, claim_ahead_run_sec=5.0):
        learn_short_runs()
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.3}) for _ in range(2 * CONCURRENCY)]
        wait_for(lambda: Job.objects.filter(status="running").count() == len(jobs), what="claimed ahead")

    # The stop waited for them: run, not left running under a lease nobody renews.
    assert Job.objects.filter(job_id__in=[item.job_id for item in jobs], status="succeeded").count() == len(jobs)
