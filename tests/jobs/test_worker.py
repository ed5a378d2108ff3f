"""The worker loop, run in a thread against the test database: the seed's test plan and more."""

import time
import uuid
from datetime import timedelta

from django.utils import timezone

from jobs import selectors, services
from jobs.models import Job, JobEvent, Worker
from jobs.worker import parse_workers_json
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.conftest import enqueue, job, kinds, running_worker, wait_for_status

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


def test_an_unknown_task_fails_at_once_with_a_clear_error():
    enqueued = enqueue(task="nobody.handles.this")

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert failed.attempt == 1
    assert failed.error == "Unknown task 'nobody.handles.this': no handler is registered for it in this worker."
    assert "test.echo" in JobEvent.objects.get(job_id=enqueued.job_id, kind="failed").payload["known_tasks"]


def test_a_result_that_cannot_be_stored_is_an_error():
    enqueued = enqueue(task="test.unserializable", max_attempts=1)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert "TypeError" in failed.error


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

    runs = [JobEvent.objects.get(job_id=j.job_id, kind="done").payload["result"] for j in (first, second)]
    runs.sort(key=lambda run: run["started"])
    assert runs[0]["ended"] <= runs[1]["started"]
    assert job(first.job_id).attempt == job(second.job_id).attempt == 1  # the bounce burned no attempt
    bounced = JobEvent.objects.filter(kind="requeue", payload__reason="lock_key_busy")
    assert bounced.exists()


def test_jobs_due_later_run_when_due():
    enqueued = enqueue(task="test.echo", available_at=timezone.now() + timedelta(seconds=0.8))

    with running_worker():
        time.sleep(0.4)
        assert job(enqueued.job_id).status == "queued"
        done = wait_for_status(enqueued.job_id, "succeeded", timeout=5)

    picked = JobEvent.objects.get(job_id=enqueued.job_id, kind="picked")
    assert picked.ts >= done.available_at


def test_expired_lease_is_requeued_by_the_reaper_and_run_again():
    enqueued = enqueue(task="test.echo", max_attempts=3)
    services.jobs_claim(queue="default", limit=1, worker_id="a-dead-worker", busy_backoff_sec=1)
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
        registered = wait_for(lambda: Worker.objects.filter(worker_id=worker.worker_id).first(), what="registration")
        assert registered.queues == {"default": 3, "reports": 1}
        assert registered in selectors.live_workers()

    assert not Worker.objects.filter(worker_id=worker.worker_id).exists()


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
    assert row.status == "queued" and row.lease_expires_at is None
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
    for item, spec in zip(enqueued, specs):
        result = JobEvent.objects.get(job_id=item.job_id, kind="done").payload["result"]
        runs.setdefault(spec.lock_key, []).append((result["started"], result["ended"]))
    for intervals in runs.values():
        intervals.sort()
        assert all(earlier[1] <= later[0] for earlier, later in zip(intervals, intervals[1:]))


def test_workers_json_parsing():
    assert parse_workers_json('[{"queue": "load.cbr", "concurrency": 2}, {"queue": "load.sgx"}]') == {
        "load.cbr": 2,
        "load.sgx": 1,
    }
    for bad in [
        "{}",
        "[]",
        '[{"concurrency": 2}]',
        '[{"queue": "q", "concurrency": 0}]',
        '[{"queue": "q", "concurrency": "2"}]',
        "nope",
    ]:
        try:
            parse_workers_json(bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad!r}")


def test_unique_ids():
    assert len({enqueue(task="test.echo").job_id for _ in range(10)}) == 10
    assert all(isinstance(item, uuid.UUID) for item in Job.objects.values_list("job_id", flat=True))
