"""The queue's state changes, on a real PostgreSQL; concurrency with real threads and connections."""

import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs import services
from jobs.models import CANCEL_CHANNEL, Job, JobEvent
from pipeline_project.core.errors import ConflictError, NotFoundError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening, raw_connection, run_in_threads
from tests.jobs.conftest import enqueue, job, kinds

pytestmark = ALL_DATABASES_COMMITTED

WORKER = "test-worker"


def claim(queue="default", limit=10, **kwargs):
    return services.jobs_claim(
        queue=queue, limit=limit, worker_id=WORKER, busy_backoff_sec=kwargs.pop("backoff", 15), **kwargs
    )


def succeed(claimed, result=None):
    return services.jobs_complete(
        outcomes=[services.Outcome(lease=c.lease, kind="succeeded", result=result) for c in claimed], worker_id=WORKER
    )


# --- enqueue ----------------------------------------------------------------------------


def test_enqueue_writes_the_job_and_a_queued_event():
    enqueued = enqueue(task="test.echo", args={"x": 1}, producer="daemon-1", idempotency_key="k1")

    assert enqueued.created and enqueued.status == "queued"
    row = job(enqueued.job_id)
    assert (row.task, row.args, row.status, row.attempt, row.priority, row.max_attempts) == (
        "test.echo",
        {"x": 1},
        "queued",
        0,
        100,
        5,
    )
    event = JobEvent.objects.get(job_id=enqueued.job_id)
    assert event.kind == "queued" and event.payload == {"producer": "daemon-1", "idempotency_key": "k1"}


def test_same_idempotency_key_returns_the_same_job():
    first = enqueue(task="t", lock_key="L", idempotency_key="same")
    second = enqueue(task="t", lock_key="L", idempotency_key="same")

    assert (second.job_id, second.created) == (first.job_id, False)
    assert Job.objects.count() == 1


def test_idempotency_key_with_different_parameters_conflicts_and_writes_nothing():
    enqueue(task="t", lock_key="L", args={"a": 1}, idempotency_key="same")

    with pytest.raises(ConflictError) as error:
        services.job_enqueue_many(
            specs=[
                services.JobSpec(queue="default", task="t", lock_key="other", idempotency_key="fresh"),
                services.JobSpec(queue="default", task="t", lock_key="L", args={"a": 2}, idempotency_key="same"),
            ]
        )

    assert error.value.details["differs"] == ["args"]
    assert Job.objects.count() == 1  # the fresh job was rolled back too


def test_fifty_concurrent_enqueues_with_one_key_create_one_job():
    def trigger(_index):
        return enqueue(task="t", lock_key="L", idempotency_key="one-key").job_id

    job_ids = run_in_threads(50, trigger)

    assert len(set(job_ids)) == 1
    assert Job.objects.count() == 1
    assert JobEvent.objects.filter(kind="queued").count() == 1


# --- claim ------------------------------------------------------------------------------


def test_claim_takes_available_jobs_by_priority_then_age():
    low = enqueue(task="t", priority=200)
    first = enqueue(task="t")
    second = enqueue(task="t")
    urgent = enqueue(task="t", priority=0)
    enqueue(task="t", available_at=timezone.now() + timedelta(hours=1))
    enqueue(task="t", queue="elsewhere")

    claimed, bounced = claim(limit=10)

    assert [c.lease.job_id for c in claimed] == [urgent.job_id, first.job_id, second.job_id, low.job_id]
    assert bounced == 0
    row = job(urgent.job_id)
    assert (row.status, row.attempt) == ("running", 1)
    assert row.started_at and row.heartbeat_at and row.lease_expires_at > timezone.now()
    assert kinds(urgent.job_id) == ["queued", "picked"]
    assert JobEvent.objects.get(job_id=urgent.job_id, kind="picked").payload == {"worker": WORKER, "attempt": 1}


def test_claim_respects_the_limit():
    for _ in range(5):
        enqueue(task="t")

    assert len(claim(limit=3)[0]) == 3
    assert len(claim(limit=3)[0]) == 2
    assert claim(limit=3)[0] == []


def test_concurrent_claims_never_take_the_same_job():
    services.job_enqueue_many(specs=[services.JobSpec(queue="default", task="t", lock_key=f"k{i}") for i in range(400)])

    def claim_until_empty(_index):
        taken = []
        while batch := claim(limit=7)[0]:
            taken.extend(c.lease.job_id for c in batch)
        return taken

    taken = run_in_threads(4, claim_until_empty)

    everything = [job_id for ids in taken for job_id in ids]
    assert len(everything) == len(set(everything)) == 400
    assert sum(1 for ids in taken if ids) >= 2


def test_a_busy_lock_key_bounces_without_burning_an_attempt():
    first = enqueue(task="t", lock_key="shared")
    claim(limit=1)
    second = enqueue(task="t", lock_key="shared")

    claimed, bounced = claim(limit=5, backoff=30)

    assert (claimed, bounced) == ([], 1)
    row = job(second.job_id)
    assert (row.status, row.attempt) == ("queued", 0)
    assert row.available_at > timezone.now() + timedelta(seconds=25)
    event = JobEvent.objects.filter(job_id=second.job_id).last()
    assert event.kind == "requeue" and event.payload["reason"] == "lock_key_busy"
    assert job(first.job_id).status == "running"


def test_one_batch_takes_one_job_per_lock_key():
    jobs = [enqueue(task="t", lock_key="shared") for _ in range(3)]
    other = enqueue(task="t", lock_key="alone")

    claimed, bounced = claim(limit=10)

    assert {c.lease.job_id for c in claimed} == {jobs[0].job_id, other.job_id}
    assert bounced == 2


def test_skipped_lock_keys_are_left_alone_not_bounced():
    waiting = enqueue(task="t", lock_key="finishing")

    claimed, bounced = claim(limit=5, skip_lock_keys=["finishing"])

    assert (claimed, bounced) == ([], 0)
    assert job(waiting.job_id).available_at <= timezone.now()
    assert kinds(waiting.job_id) == ["queued"]


def test_the_database_refuses_two_running_jobs_on_one_lock_key():
    first = enqueue(task="t", lock_key="shared")
    second = enqueue(task="t", lock_key="shared")
    Job.objects.filter(job_id=first.job_id).update(status="running")

    with pytest.raises(IntegrityError) as error, transaction.atomic():
        Job.objects.filter(job_id=second.job_id).update(status="running")

    assert "ux_dl_jobs_running_lock_key" in str(error.value)


# --- heartbeat, complete, release, guards ---------------------------------------------------


def test_heartbeat_renews_held_leases_and_reports_cancellation():
    kept, canceled = (enqueue(task="t") for _ in range(2))
    claimed, _ = claim()
    Job.objects.filter(job_id=canceled.job_id).update(cancel_requested=True)
    Job.objects.update(lease_expires_at=timezone.now() + timedelta(seconds=1))

    held = services.jobs_heartbeat(leases=[c.lease for c in claimed], worker_id=WORKER)

    assert held == {kept.job_id: False, canceled.job_id: True}
    assert job(kept.job_id).lease_expires_at > timezone.now() + timedelta(seconds=50)
    assert kinds(kept.job_id)[-1] == "heartbeat"


def test_success_is_recorded_with_its_result():
    enqueued = enqueue(task="t")
    claimed, _ = claim()

    statuses = succeed(claimed, result={"rows": 3})

    assert statuses == {enqueued.job_id: "succeeded"}
    row = job(enqueued.job_id)
    assert row.status == "succeeded" and row.finished_at and row.lease_expires_at is None
    done = JobEvent.objects.get(job_id=enqueued.job_id, kind="done")
    assert done.payload["result"] == {"rows": 3} and done.payload["attempt"] == 1


def test_an_error_retries_with_backoff_until_attempts_are_spent():
    enqueued = enqueue(task="t", max_attempts=2)

    def fail_once():
        claimed, _ = claim()
        return services.jobs_complete(
            outcomes=[services.Outcome(lease=claimed[0].lease, kind="error", error="ValueError: x", retry_delay_sec=0)],
            worker_id=WORKER,
        )

    assert fail_once() == {enqueued.job_id: "queued"}
    assert job(enqueued.job_id).finished_at is None and job(enqueued.job_id).error == "ValueError: x"
    assert fail_once() == {enqueued.job_id: "failed"}
    row = job(enqueued.job_id)
    assert (row.status, row.attempt) == ("failed", 2) and row.finished_at
    assert kinds(enqueued.job_id) == ["queued", "picked", "requeue", "picked", "failed"]


def test_retry_delay_is_applied():
    enqueue(task="t")
    claimed, _ = claim()

    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed[0].lease, kind="error", retry_delay_sec=60)], worker_id=WORKER
    )

    assert job(claimed[0].lease.job_id).available_at > timezone.now() + timedelta(seconds=55)
    assert claim()[0] == []


@pytest.mark.parametrize(("kind", "status"), [("fatal", "failed"), ("canceled", "canceled")])
def test_fatal_and_canceled_outcomes_end_the_job(kind, status):
    enqueued = enqueue(task="t")
    claimed, _ = claim()

    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed[0].lease, kind=kind, error="stop")], worker_id=WORKER
    )

    assert job(enqueued.job_id).status == status
    assert kinds(enqueued.job_id)[-1] == status


def test_a_worker_that_lost_its_lease_cannot_overwrite_the_job():
    enqueued = enqueue(task="t", lease_ttl_sec=1)
    stale = claim()[0][0]
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.jobs_reap()
    fresh = claim()[0][0]  # another worker took it: attempt 2

    assert succeed([stale]) == {}
    assert services.jobs_heartbeat(leases=[stale.lease], worker_id=WORKER) == {}
    assert services.job_progress(lease=stale.lease, progress={"x": 1}) is None
    assert services.jobs_release(leases=[stale.lease], worker_id=WORKER) == 0
    row = job(enqueued.job_id)
    assert (row.status, row.attempt, row.progress) == ("running", 2, {})
    assert succeed([fresh]) == {enqueued.job_id: "succeeded"}


def test_a_lease_from_before_an_operator_retry_stays_invalid():
    enqueued = enqueue(task="t")
    stale = claim()[0][0]
    Job.objects.filter(job_id=enqueued.job_id).update(status="lost")
    services.job_retry(job_id=enqueued.job_id)
    fresh = claim()[0][0]

    assert fresh.lease.attempt == stale.lease.attempt == 1  # attempts were reset...
    assert succeed([stale]) == {}  # ...but started_at differs, so the old lease matches nothing
    assert succeed([fresh]) == {enqueued.job_id: "succeeded"}


def test_release_gives_jobs_back_without_delay():
    enqueued = enqueue(task="t")
    claimed, _ = claim()

    assert services.jobs_release(leases=[claimed[0].lease], worker_id=WORKER) == 1

    row = job(enqueued.job_id)
    assert row.status == "queued" and row.available_at <= timezone.now() and row.lease_expires_at is None
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload["reason"] == "worker_shutdown"


def test_progress_is_stored_and_reports_cancellation():
    enqueued = enqueue(task="t")
    lease = claim()[0][0].lease

    assert services.job_progress(lease=lease, progress={"done": 5}) is False
    Job.objects.filter(job_id=enqueued.job_id).update(cancel_requested=True)
    assert services.job_progress(lease=lease, progress={"done": 6}) is True
    assert job(enqueued.job_id).progress == {"done": 6}


# --- reaper and retention ---------------------------------------------------------------


def test_reaper_requeues_expired_leases_and_loses_spent_ones():
    retry = enqueue(task="t", max_attempts=3)
    spent = enqueue(task="t", max_attempts=1)
    alive = enqueue(task="t")
    claim()
    Job.objects.exclude(job_id=alive.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    reaped = services.jobs_reap()

    assert (reaped.requeued, reaped.lost, reaped.acted) == (1, 1, True)
    assert job(retry.job_id).status == "queued" and job(retry.job_id).attempt == 1
    assert job(spent.job_id).status == "lost" and job(spent.job_id).finished_at
    assert job(alive.job_id).status == "running"
    requeue = JobEvent.objects.filter(job_id=retry.job_id).last()
    assert requeue.kind == "requeue" and requeue.payload["reason"] == "lease_expired"
    assert kinds(spent.job_id)[-1] == "lost"


def test_only_one_reaper_acts_at_a_time():
    enqueue(task="t")
    claim()
    Job.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    with raw_connection("default") as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(%s)", [services.REAPER_LOCK_ID])
        assert services.jobs_reap() == services.Reaped(requeued=0, lost=0, acted=False)

    assert services.jobs_reap().requeued == 1


def test_concurrent_reapers_reap_each_job_once():
    services.job_enqueue_many(specs=[services.JobSpec(queue="default", task="t", lock_key=f"k{i}") for i in range(50)])
    claim(limit=50)
    Job.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))

    results = run_in_threads(6, lambda _index: services.jobs_reap())

    assert sum(result.requeued for result in results) == 50
    assert JobEvent.objects.filter(kind="requeue").count() == 50


def test_retention_prunes_old_finished_jobs_and_keeps_n_identical():
    now = timezone.now()
    old = enqueue(task="report", args={"day": 1})
    identical = [enqueue(task="report", args={"day": 2}) for _ in range(5)]
    different = enqueue(task="report", args={"day": 3})
    unfinished = enqueue(task="report", args={"day": 2})
    Job.objects.filter(job_id=old.job_id).update(status="succeeded", finished_at=now - timedelta(days=30))
    for age, enqueued in enumerate(identical):
        Job.objects.filter(job_id=enqueued.job_id).update(status="succeeded", finished_at=now - timedelta(minutes=age))
    Job.objects.filter(job_id=different.job_id).update(status="failed", finished_at=now)

    pruned = services.jobs_prune(older_than_sec=7 * 86400, max_identical=2)

    assert pruned == 4  # the 30-day-old job and the three oldest identical ones
    kept = set(Job.objects.values_list("job_id", flat=True))
    assert kept == {identical[0].job_id, identical[1].job_id, different.job_id, unfinished.job_id}
    assert not JobEvent.objects.filter(job_id=old.job_id).exists()  # the journal goes with the job


# --- cancel, retry, delete ------------------------------------------------------------------


def test_cancel_of_a_queued_job_is_immediate():
    enqueued = enqueue(task="t")

    assert services.job_cancel(job_id=enqueued.job_id, requested_by="ops") == "canceled"

    row = job(enqueued.job_id)
    assert row.status == "canceled" and row.finished_at and row.cancel_requested
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload == {"by": "ops", "while": "queued"}
    assert claim()[0] == []


def test_cancel_of_a_running_job_is_requested_and_announced():
    enqueued = enqueue(task="t")
    claim()
    with listening("default", CANCEL_CHANNEL) as received:
        assert services.job_cancel(job_id=enqueued.job_id) == "running"

        assert received() == [str(enqueued.job_id)]
    assert job(enqueued.job_id).cancel_requested is True


def test_cancel_of_a_finished_job_conflicts_and_a_repeat_cancel_is_harmless():
    done = enqueue(task="t")
    succeed(claim()[0])
    canceled = enqueue(task="t")
    services.job_cancel(job_id=canceled.job_id)

    with pytest.raises(ConflictError) as error:
        services.job_cancel(job_id=done.job_id)
    assert error.value.details["status"] == "succeeded"
    assert services.job_cancel(job_id=canceled.job_id) == "canceled"
    with pytest.raises(NotFoundError):
        services.job_cancel(job_id=uuid.uuid4())


@pytest.mark.parametrize("status", ["failed", "canceled", "lost"])
def test_operator_retry_resets_attempts(status):
    enqueued = enqueue(task="t")
    claim()
    Job.objects.filter(job_id=enqueued.job_id).update(status=status, attempt=5, error="x", finished_at=timezone.now())

    assert services.job_retry(job_id=enqueued.job_id, requested_by="ops") is True

    row = job(enqueued.job_id)
    assert (row.status, row.attempt, row.error, row.finished_at, row.started_at) == ("queued", 0, None, None, None)
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload == {"reason": "retry_requested", "by": "ops"}


@pytest.mark.parametrize("status", ["queued", "running", "succeeded"])
def test_operator_retry_leaves_other_statuses_alone(status):
    enqueued = enqueue(task="t")
    Job.objects.filter(job_id=enqueued.job_id).update(status=status)

    assert services.job_retry(job_id=enqueued.job_id) is False
    assert job(enqueued.job_id).status == status


def test_delete_dry_run_force_and_running_guard():
    running = enqueue(task="t")
    claim()
    queued = enqueue(task="t")

    preview = services.job_delete(job_id=queued.job_id, dry_run=True)
    assert (preview.deleted, preview.dry_run, preview.events) == (False, True, 1)
    assert Job.objects.filter(job_id=queued.job_id).exists()

    assert services.job_delete(job_id=queued.job_id).deleted is True
    assert not JobEvent.objects.filter(job_id=queued.job_id).exists()

    with pytest.raises(ConflictError):
        services.job_delete(job_id=running.job_id)
    assert services.job_delete(job_id=running.job_id, force=True).deleted is True
    assert Counter(Job.objects.values_list("status", flat=True)) == Counter()
