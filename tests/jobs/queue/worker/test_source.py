"""The queue's work source in the worker runtime, run in a thread against the test database: the seed's
test plan and more."""

import itertools
import threading
import time
import uuid
from datetime import timedelta

from django.utils import timezone

from jobs.queue import selectors, services
from jobs.queue.models import Job, JobEvent, Worker
from jobs.queue.worker import housekeeping as periodic
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.conftest import enqueue, job, kinds, running_worker, wait_for_status
from tests.jobs.helpers import insert_unclaimable

pytestmark = ALL_DATABASES_COMMITTED


def test_enqueue_claim_heartbeat_done_succeeded():
    enqueued = enqueue(task="test.sleep", args={"seconds": 0.6})

    with running_worker():
        finished = wait_for_status(enqueued.job_id, "succeeded")

    events = kinds(enqueued.job_id)
    assert events[:2] == ["queued", "picked"] and events[-1] == "done"
    assert "heartbeat" in events  # 0.6 s of work, a heartbeat every 0.2 s
    assert finished.attempt == 1 and finished.finished_at and finished.heartbeat_at
    assert JobEvent.objects.get(job_id=enqueued.job_id, kind="done").payload["result"]["ended"] > 0


def test_result_is_kept_in_the_done_event():
    enqueued = enqueue(task="test.echo", args={"n": 7})

    with running_worker():
        wait_for_status(enqueued.job_id, "succeeded")

    done = JobEvent.objects.get(job_id=enqueued.job_id, kind="done")
    assert done.payload["result"] == {"args": {"n": 7}, "attempt": 1}
    assert done.payload["duration_ms"] >= 0


def test_a_job_enqueued_while_idle_is_picked_up_by_notify_not_the_sweep():
    with running_worker():
        time.sleep(0.3)  # the worker found nothing and waits
        enqueued = enqueue(task="test.echo")
        started = time.monotonic()
        wait_for_status(enqueued.job_id, "succeeded", timeout=5)
        assert time.monotonic() - started < 2  # the sweep runs only every 60 s here


def test_failures_retry_with_backoff_then_fail_at_max_attempts():
    enqueued = enqueue(task="test.fail", max_attempts=3)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert failed.attempt == 3
    assert failed.error == "ValueError: boom on attempt 3"
    assert kinds(enqueued.job_id).count("requeue") == 2
    last = JobEvent.objects.filter(job_id=enqueued.job_id, kind="failed").get()
    assert last.payload["exception_class"] == "builtins.ValueError" and "Traceback" in last.payload["traceback"]


def test_a_retry_can_succeed():
    enqueued = enqueue(task="test.flaky", args={"succeed_on": 3})

    with running_worker():
        succeeded = wait_for_status(enqueued.job_id, "succeeded")

    assert succeeded.attempt == 3 and succeeded.error is None


def test_cancel_of_a_running_job_stops_it_between_chunks():
    enqueued = enqueue(task="test.sleep", args={"seconds": 30})

    with running_worker():
        wait_for_status(enqueued.job_id, "running")
        started = time.monotonic()
        services.job_cancel(job_id=enqueued.job_id)
        canceled = wait_for_status(enqueued.job_id, "canceled", timeout=5)
        assert time.monotonic() - started < 2

    assert canceled.finished_at and canceled.cancel_requested
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload["by"] == "handler"


def test_cancel_kills_a_handlers_subprocess_at_once():
    enqueued = enqueue(task="test.subprocess", args={"seconds": 30})

    with running_worker():
        wait_for_status(enqueued.job_id, "running")
        time.sleep(0.2)  # the child is running
        started = time.monotonic()
        services.job_cancel(job_id=enqueued.job_id)
        canceled = wait_for_status(enqueued.job_id, "canceled", timeout=5)
        assert time.monotonic() - started < 1

    assert canceled.finished_at
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload["by"] == "handler"


def test_progress_is_visible_on_the_job():
    enqueued = enqueue(task="test.progress")

    with running_worker():
        done = wait_for_status(enqueued.job_id, "succeeded")

    assert done.progress == {"step": 3, "of": 3}


def test_two_jobs_on_one_lock_key_run_one_after_the_other():
    first = enqueue(task="test.sleep", args={"seconds": 0.4}, lock_key="account-7")
    second = enqueue(task="test.sleep", args={"seconds": 0.4}, lock_key="account-7")

    with running_worker(queues={"default": 4}):
        wait_for_status(first.job_id, "succeeded")
        wait_for_status(second.job_id, "succeeded")

    first_run, second_run = (
        JobEvent.objects.get(job_id=j.job_id, kind="done").payload["result"] for j in (first, second)
    )
    assert first_run["ended"] <= second_run["started"]  # one after the other, in order
    assert job(first.job_id).attempt == job(second.job_id).attempt == 1
    assert not JobEvent.objects.filter(kind="requeue").exists()  # waiting wrote nothing
    # The first run's slot passed straight to the second, in the statement that recorded the first.
    assert JobEvent.objects.get(job_id=second.job_id, kind="picked").ts == job(first.job_id).finished_at


def test_jobs_due_later_run_when_due():
    due = timezone.now() + timedelta(seconds=2)
    enqueued = enqueue(task="test.echo", available_at=due)

    with running_worker():
        time.sleep(0.4)
        status, looked_at = job(enqueued.job_id).status, timezone.now()
        done = wait_for_status(enqueued.job_id, "succeeded", timeout=10)

    assert status == "queued" or looked_at >= due  # a worker slow to start (a busy machine) looks late

    picked = JobEvent.objects.get(job_id=enqueued.job_id, kind="picked")
    assert picked.ts >= done.available_at


def test_expired_lease_is_requeued_by_the_reaper_and_run_again():
    enqueued = enqueue(task="test.echo", max_attempts=3)
    services.jobs_claim(queue="default", limit=1, worker_id="a-dead-worker")
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    with running_worker():
        done = wait_for_status(enqueued.job_id, "succeeded")

    assert done.attempt == 2
    assert kinds(enqueued.job_id) == ["queued", "picked", "requeue", "picked", "done"]


def test_a_run_whose_lease_was_taken_away_is_not_recorded():
    enqueued = enqueue(task="test.sleep", args={"seconds": 1.5})

    with running_worker():
        wait_for_status(enqueued.job_id, "running")
        # An operator (or a reaper elsewhere) reset the job while it ran.
        Job.objects.filter(job_id=enqueued.job_id).update(status="failed", error="reset by hand")
        time.sleep(2)

    row = job(enqueued.job_id)
    assert (row.status, row.error) == ("failed", "reset by hand")
    assert "done" not in kinds(enqueued.job_id)


def test_worker_registers_itself_while_running():
    with running_worker(queues={"default": 3, "reports": 1}) as worker:
        [source] = worker.sources
        registered = wait_for(lambda: Worker.objects.filter(worker_id=source.worker_id).first(), what="registration")
        assert registered.queues == {"default": 3, "reports": 1}
        assert registered in selectors.live_workers()

    assert not Worker.objects.filter(worker_id=source.worker_id).exists()


def test_stop_waits_for_running_jobs_to_finish():
    enqueued = enqueue(task="test.sleep", args={"seconds": 0.5})

    with running_worker():
        wait_for_status(enqueued.job_id, "running")

    assert job(enqueued.job_id).status == "succeeded"


def test_stop_releases_jobs_that_outlast_the_shutdown_timeout():
    enqueued = enqueue(task="test.sleep", args={"seconds": 30})

    with running_worker(shutdown_timeout_sec=0.3):
        wait_for_status(enqueued.job_id, "running")

    row = job(enqueued.job_id)
    assert (row.status, row.attempt, row.lease_expires_at) == ("queued", 0, None)  # no attempt spent
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload["reason"] == "worker_shutdown"


def test_only_configured_queues_are_served():
    mine = enqueue(task="test.echo", queue="mine")
    theirs = enqueue(task="test.echo", queue="theirs")

    with running_worker(queues={"mine": 1}):
        wait_for_status(mine.job_id, "succeeded")
        time.sleep(0.2)

    assert job(theirs.job_id).status == "queued"


def test_many_jobs_over_few_lock_keys_never_overlap_on_a_key():
    specs = [
        services.JobSpec(queue="default", task="test.sleep", args={"seconds": 0.01}, lock_key=f"key-{i % 3}")
        for i in range(30)
    ]
    enqueued = services.job_enqueue_many(specs=specs)

    with running_worker(queues={"default": 6}):
        wait_for(lambda: Job.objects.filter(status="succeeded").count() == 30, timeout=30, what="all jobs")

    runs: dict[str, list] = {}
    for item, spec in zip(enqueued, specs, strict=True):
        result = JobEvent.objects.get(job_id=item.job_id, kind="done").payload["result"]
        runs.setdefault(spec.lock_key, []).append((result["started"], result["ended"]))
    for intervals in runs.values():
        intervals.sort()
        assert all(earlier[1] <= later[0] for earlier, later in itertools.pairwise(intervals))


def test_a_lease_shorter_than_the_heartbeat_is_renewed_in_time():
    jobs = [enqueue(task="test.sleep", args={"seconds": 4}, lease_ttl_sec=3, lock_key="shared") for _ in range(2)]

    with running_worker(queues={"default": 2}, heartbeat_sec=10, reaper_period_sec=0.2):
        for enqueued in jobs:
            wait_for_status(enqueued.job_id, "succeeded", timeout=20)

    for enqueued in jobs:
        assert job(enqueued.job_id).attempt == 1  # never reaped, never run twice
        assert kinds(enqueued.job_id).count("heartbeat") >= 3  # renewed every second (TTL / 3)
    runs = sorted(JobEvent.objects.get(job_id=j.job_id, kind="done").payload["result"]["started"] for j in jobs)
    assert runs[1] - runs[0] >= 4  # one after the other on their key


def test_a_pause_stops_claims_at_once_and_resume_wakes_the_worker():
    with running_worker(queues={"default": 2}):
        first = enqueue(task="test.echo")
        wait_for_status(first.job_id, "succeeded")
        services.queue_pause(queue="default", by="test")
        held = [enqueue(task="test.echo") for _ in range(3)]  # their NOTIFY wakes the worker: it claims nothing
        time.sleep(1.0)
        assert all(job(item.job_id).status == "queued" for item in held)
        services.queue_resume(queue="default", by="test")
        for item in held:
            wait_for_status(item.job_id, "succeeded", timeout=2)  # woken by the resume's NOTIFY, not the sweep


def test_a_worker_hears_of_new_limits_and_keeps_them():
    """Limits set while the worker runs: it hears them (NOTIFY, not the 60-s sweep) and claims
    within them, the next job of a key too (no complete-and-claim past the limit)."""
    with running_worker(queues={"default": 6}):
        warm = enqueue(task="test.echo")
        wait_for_status(warm.job_id, "succeeded")
        services.queue_limits_set(queue="default", by="test", max_running=2)
        jobs = [enqueue(task="test.sleep", args={"seconds": 0.05}, lock_key=f"k{i % 3}") for i in range(12)]
        peak, deadline = 0, time.monotonic() + 15
        while Job.objects.filter(status="succeeded").count() < 1 + len(jobs):
            assert time.monotonic() < deadline, "the limited jobs did not all run"
            peak = max(peak, Job.objects.filter(status="running").count())
            time.sleep(0.005)
        services.queue_limits_set(queue="default", by="test")  # cleared: claimed as before
        free = [enqueue(task="test.echo") for _ in range(3)]
        for item in free:
            wait_for_status(item.job_id, "succeeded", timeout=2)
    assert peak == 2


# --- hostile jobs: no job may stall a worker ---------------------------------------------------


def test_a_job_the_database_refuses_to_claim_does_not_block_the_queues():
    before = [enqueue(task="test.echo") for _ in range(3)]
    bad = insert_unclaimable()
    behind = [enqueue(task="test.echo") for _ in range(3)]
    elsewhere = enqueue(task="test.echo", queue="other")

    with running_worker(queues={"default": 2, "other": 1}):
        for enqueued in [*before, *behind, elsewhere]:
            wait_for_status(enqueued.job_id, "succeeded")
        failed = wait_for_status(bad, "failed")

    assert "refused" in failed.error
    assert JobEvent.objects.get(job_id=bad, kind="failed").payload["reason"] == "unclaimable"


def test_progress_writes_are_rate_limited_and_the_last_one_is_kept(monkeypatch):
    writes = []
    real = services.job_progress
    monkeypatch.setattr(services, "job_progress", lambda **kwargs: writes.append(kwargs) or real(**kwargs))
    enqueued = enqueue(task="test.chatty", args={"steps": 5000})

    with running_worker(progress_interval_sec=1.0):
        done = wait_for_status(enqueued.job_id, "succeeded")

    assert len(writes) <= 2  # 5,000 reports, at most one write a second (the run is shorter)
    assert done.progress == {"step": 5000}


def test_housekeeping_runs_off_the_claim_path(monkeypatch):
    pruning = threading.Event()

    def slow_prune(**kwargs):
        pruning.set()
        time.sleep(3)
        return {"pruned": 0}

    monkeypatch.setattr(periodic, "prune_finished_jobs", slow_prune)
    with running_worker(retention_period_sec=0.1):
        assert pruning.wait(5)
        started = time.monotonic()
        enqueued = enqueue(task="test.echo")
        wait_for_status(enqueued.job_id, "succeeded", timeout=2)
        assert time.monotonic() - started < 1


def test_unique_ids():
    assert len({enqueue(task="test.echo").job_id for _ in range(10)}) == 10
    assert all(isinstance(item, uuid.UUID) for item in Job.objects.values_list("job_id", flat=True))
