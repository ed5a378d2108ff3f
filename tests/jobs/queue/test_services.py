"""The queue's state changes, on a real PostgreSQL; concurrency with real threads and connections."""

import threading
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import CANCEL_CHANNEL, NOTIFY_CHANNEL, Job, JobEvent, PeriodicTask
from jobs.queue.services import claims
from pipeline_project.api.errors import ConflictError, InvalidInputError, NotFoundError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening, raw_connection, run_in_threads
from tests.jobs.conftest import enqueue, job, kinds
from tests.jobs.helpers import insert_unclaimable

pytestmark = ALL_DATABASES_COMMITTED

WORKER = "test-worker"


def claim(queue="default", limit=10):
    return services.jobs_claim(queue=queue, limit=limit, worker_id=WORKER)


def succeed(claimed, result=None):
    """Record success for claimed jobs; return their new statuses."""
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
    assert event.kind == "queued"
    assert {
        "producer": "daemon-1",
        "idempotency_key": "k1",
    }.items() <= event.payload.items()
    # PostgreSQL's JSON drops trailing zeros of the microseconds, so compare instants, not strings.
    assert datetime.fromisoformat(event.payload["available_at"]) == row.available_at


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


@pytest.mark.parametrize(
    ("field", "value"),
    [
        # 1,000 characters, 4,000 bytes: a btree entry of the running-lock_key index holds 2,704.
        ("lock_key", "\U00010000" * 1000),
        ("idempotency_key", "é" * 513),
        ("queue", "q" * 201),
        ("task", "a task"),
        ("partition_key", "a\x00b"),
        ("producer", "p" * 256),
        ("args", {"ratio": float("nan")}),
        ("args", {"when": float("inf")}),
        ("args", {"text": "lone \udc00"}),
        ("args", ["not", "an", "object"]),
        ("priority", -1),
        ("max_attempts", 1001),
        ("lease_ttl_sec", 0),
    ],
)
def test_enqueue_refuses_what_breaks_the_rules_and_writes_nothing(field, value):
    specs = [
        services.JobSpec(queue="default", task="t", lock_key="fine"),
        services.JobSpec(**{"queue": "default", "task": "t", "lock_key": "k", field: value}),
    ]

    with pytest.raises(InvalidInputError) as refused:
        services.job_enqueue_many(specs=specs)

    assert list(refused.value.details["jobs"]) == ["1"] and field in refused.value.details["jobs"]["1"]
    assert not Job.objects.exists() and not JobEvent.objects.exists()


def test_the_default_lease_ttl_comes_from_settings_for_every_producer(settings):
    settings.DL_DEFAULT_LEASE_TTL_SEC = 77

    defaulted = enqueue(task="t")
    explicit = enqueue(task="t", lease_ttl_sec=5)

    assert job(defaulted.job_id).lease_ttl_sec == 77
    assert job(explicit.job_id).lease_ttl_sec == 5


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

    claimed = claim(limit=10)

    assert [c.lease.job_id for c in claimed] == [urgent.job_id, first.job_id, second.job_id, low.job_id]
    row = job(urgent.job_id)
    assert (row.status, row.attempt) == ("running", 1)
    assert row.started_at and row.heartbeat_at and row.lease_expires_at > timezone.now()
    assert kinds(urgent.job_id) == ["queued", "picked"]
    assert JobEvent.objects.get(job_id=urgent.job_id, kind="picked").payload == {"worker": WORKER, "attempt": 1}


def test_claim_respects_the_limit():
    for _ in range(5):
        enqueue(task="t")

    assert len(claim(limit=3)) == 3
    assert len(claim(limit=3)) == 2
    assert claim(limit=3) == []


def test_concurrent_claims_never_take_the_same_job():
    services.job_enqueue_many(specs=[services.JobSpec(queue="default", task="t", lock_key=f"k{i}") for i in range(400)])

    def claim_until_empty(_index):
        taken = []
        while batch := claim(limit=7):
            taken.extend(c.lease.job_id for c in batch)
        return taken

    taken = run_in_threads(4, claim_until_empty)

    everything = [job_id for ids in taken for job_id in ids]
    assert len(everything) == len(set(everything)) == 400
    assert sum(1 for ids in taken if ids) >= 2


def test_a_busy_lock_key_is_passed_over_with_no_write_and_claimable_when_it_frees():
    first = enqueue(task="t", lock_key="shared")
    [running] = claim(limit=1)
    second = enqueue(task="t", lock_key="shared")
    other = enqueue(task="t", lock_key="other")

    assert [c.lease.job_id for c in claim(limit=5)] == [other.job_id]
    row = job(second.job_id)
    assert (row.status, row.attempt, row.available_at <= timezone.now()) == ("queued", 0, True)
    assert kinds(second.job_id) == ["queued"]

    succeed([running])
    assert [c.lease.job_id for c in claim(limit=5)] == [second.job_id]
    assert job(first.job_id).status == "succeeded"


def test_a_lock_keys_jobs_run_one_at_a_time_in_priority_then_age_order():
    jobs = [enqueue(task="t", lock_key="shared", priority=priority) for priority in (100, 100, 50, 100)]
    alone = enqueue(task="t", lock_key="alone")
    order = []

    while batch := claim(limit=10):
        assert len([c for c in batch if c.lock_key == "shared"]) <= 1  # never two of one key at once
        order.extend(c.lease.job_id for c in batch)
        succeed(batch)

    shared = [job_id for job_id in order if job_id != alone.job_id]
    assert shared == [jobs[2].job_id, jobs[0].job_id, jobs[1].job_id, jobs[3].job_id]


def test_a_bulk_enqueue_keeps_its_order_within_a_key():
    enqueued = services.job_enqueue_many(
        specs=[services.JobSpec(queue="default", task="t", lock_key="shared", args={"i": i}) for i in range(5)]
    )
    order = []

    while batch := claim(limit=10):
        order.extend(c.args["i"] for c in batch)
        succeed(batch)

    assert order == [0, 1, 2, 3, 4] and len(enqueued) == 5


def test_a_keys_later_job_waits_while_an_earlier_one_waits_for_its_retry():
    first = enqueue(task="t", lock_key="shared")
    [claimed] = claim(limit=1)
    second = enqueue(task="t", lock_key="shared")
    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed.lease, kind="error", error="boom", retry_delay_sec=3600)],
        worker_id=WORKER,
    )

    assert job(first.job_id).status == "queued" and claim(limit=5) == []
    assert job(second.job_id).status == "queued"


def complete_and_claim(claimed, *, kind="succeeded", **fields):
    return services.job_complete_and_claim(
        outcome=services.Outcome(lease=claimed.lease, kind=kind, **fields), queue=claimed.queue, worker_id=WORKER
    )


def test_a_claim_says_whether_a_job_of_the_same_key_waits_behind_it():
    first, second = (enqueue(task="t", lock_key="shared") for _ in range(2))
    alone = enqueue(task="t", lock_key="alone")

    claimed = {c.lease.job_id: c for c in claim(limit=10)}

    assert claimed[first.job_id].has_successor and not claimed[alone.job_id].has_successor
    assert second.job_id not in claimed


def test_complete_and_claim_hands_the_slot_to_the_keys_next_job_in_one_statement():
    first, second, third = (enqueue(task="t", lock_key="shared", args={"i": i}) for i in range(3))
    [running] = claim(limit=1)
    with listening("default", NOTIFY_CHANNEL) as notified:
        status, successor = complete_and_claim(running)
        assert notified() == []  # taken at once: no other worker needs waking

    assert (status, successor.lease.job_id, successor.args, successor.lease.attempt) == (
        "succeeded",
        second.job_id,
        {"i": 1},
        1,
    )
    assert successor.has_successor  # the third one waits behind it
    assert (job(first.job_id).status, job(second.job_id).status) == ("succeeded", "running")
    assert JobEvent.objects.get(job_id=second.job_id, kind="picked").payload == {"worker": WORKER, "attempt": 1}
    assert complete_and_claim(successor)[1].lease.job_id == third.job_id


def test_complete_and_claim_takes_a_job_due_before_the_keys_next_one():
    first = enqueue(task="t", lock_key="busy")
    [running] = claim(limit=1)
    older = enqueue(task="t", lock_key="other")  # waits for a slot, ahead of busy's next job
    later = enqueue(task="t", lock_key="busy")
    with listening("default", NOTIFY_CHANNEL) as notified:
        status, taken = complete_and_claim(running)
        assert notified() == ["default"]  # busy's next job is claimable now, by any worker

    assert (status, taken.lease.job_id) == ("succeeded", older.job_id)
    assert job(later.job_id).status == "queued" and job(first.job_id).status == "succeeded"


def test_complete_and_claim_does_not_pass_a_retried_job():
    first = enqueue(task="t", lock_key="shared")
    [running] = claim(limit=1)
    later = enqueue(task="t", lock_key="shared")

    status, taken = complete_and_claim(running, kind="error", error="boom", retry_delay_sec=0)

    assert (status, taken) == ("queued", None)
    assert job(later.job_id).status == "queued"  # the retried job stays its key's first
    assert [c.lease.job_id for c in claim()] == [first.job_id]


def test_complete_and_claim_with_a_lost_lease_writes_and_claims_nothing():
    enqueue(task="t", lock_key="shared")
    [running] = claim(limit=1)
    enqueue(task="t", lock_key="shared")
    Job.objects.filter(job_id=running.lease.job_id).update(status="lost")

    assert complete_and_claim(running) == (None, None)
    assert Job.objects.filter(status="running").count() == 0


def test_a_completion_announces_the_keys_it_frees_to_every_worker():
    enqueue(task="t", lock_key="shared")
    [running] = claim(limit=1)
    waiting = enqueue(task="t", lock_key="shared")
    with listening("default", NOTIFY_CHANNEL) as notified:
        assert succeed([running]) == {running.lease.job_id: "succeeded"}
        assert notified() == ["default"]

    assert [c.lease.job_id for c in claim()] == [waiting.job_id]


def test_a_free_key_behind_a_long_backlog_of_busy_keys_is_still_claimed(monkeypatch):
    monkeypatch.setattr(claims, "CLAIM_WINDOW", 5)
    services.job_enqueue_many(specs=[services.JobSpec(queue="default", task="t", lock_key="busy") for _ in range(20)])
    claim(limit=1)  # "busy" now runs; its 19 others fill the window
    behind = enqueue(task="t", lock_key="free")

    assert [c.lease.job_id for c in claim(limit=5)] == [behind.job_id]


def test_concurrent_claims_on_shared_keys_never_run_two_of_one_key():
    services.job_enqueue_many(
        specs=[services.JobSpec(queue="default", task="t", lock_key=f"k{i % 5}", args={"i": i}) for i in range(100)]
    )
    runs: list[tuple[str, int]] = []

    def work(_index):
        idle = 0
        while idle < 20:
            batch = claim(limit=3)
            idle = 0 if batch else idle + 1
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT lock_key, count(*) FROM dl_jobs WHERE status = 'running' GROUP BY 1 HAVING count(*) > 1"
                )
                assert cursor.fetchall() == []
            runs.extend((c.lock_key, c.args["i"]) for c in batch)
            succeed(batch)

    run_in_threads(4, work)

    assert len(runs) == 100
    for key in {key for key, _ in runs}:
        assert [i for k, i in runs if k == key] == sorted(i for k, i in runs if k == key)  # each key in order


def test_two_queues_racing_for_one_key_lose_to_the_unique_index():
    enqueue(task="t", lock_key="shared", queue="a")
    enqueue(task="t", lock_key="shared", queue="b")
    with raw_connection("default") as other:
        other.execute("UPDATE dl_jobs SET status = 'running' WHERE queue = 'a'")  # uncommitted: the index waits
        with pytest.raises(IntegrityError) as lost:
            threading.Timer(0.3, other.commit).start()
            claim(queue="b")

    assert services.is_lock_key_race(lost.value)


def test_the_database_refuses_two_running_jobs_on_one_lock_key():
    first = enqueue(task="t", lock_key="shared")
    second = enqueue(task="t", lock_key="shared")
    Job.objects.filter(job_id=first.job_id).update(status="running")

    with pytest.raises(IntegrityError) as error, transaction.atomic():
        Job.objects.filter(job_id=second.job_id).update(status="running")

    assert "ux_dl_jobs_running_lock_key" in str(error.value)


# --- pause and resume --------------------------------------------------------------------


def test_a_paused_queue_is_claimed_by_no_one_and_running_jobs_still_finish():
    enqueue(task="t", lock_key="shared")
    [running] = claim(limit=1)
    waiting = [enqueue(task="t", lock_key=key) for key in ("shared", "a", "b")]

    assert services.queue_pause(queue="default", by="ops") is True
    assert services.queue_pause(queue="default", by="ops") is False  # already paused
    assert claim(limit=10) == [] and claim(queue="other") == []
    assert complete_and_claim(running) == ("succeeded", None)  # finishes, takes nothing
    assert all(job(item.job_id).status == "queued" for item in waiting)

    with listening("default", NOTIFY_CHANNEL) as notified:
        assert services.queue_resume(queue="default", by="ops") is True
        assert notified() == ["default"]  # idle workers hear it
    assert services.queue_resume(queue="default", by="ops") is False
    assert {c.lease.job_id for c in claim(limit=10)} == {item.job_id for item in waiting}


@pytest.mark.parametrize("name", ["", "a queue", "q" * 201, "nul\x00"])
def test_pausing_needs_a_valid_queue_name(name):
    with pytest.raises(InvalidInputError):
        services.queue_pause(queue=name, by="ops")


# --- heartbeat, complete, release, guards ---------------------------------------------------


def test_a_job_the_database_refuses_to_claim_is_set_aside_with_an_event():
    behind = [enqueue(task="t").job_id for _ in range(3)]
    bad = insert_unclaimable()
    with pytest.raises(DatabaseError):
        claim()

    refused = services.jobs_set_aside_unclaimable(queue="default", limit=10, worker_id=WORKER)

    assert refused == [bad]
    failed = job(bad)
    assert failed.status == "failed" and failed.finished_at and "integer out of range" in failed.error
    event = JobEvent.objects.get(job_id=bad)
    assert (event.kind, event.payload["reason"], event.payload["worker"]) == ("failed", "unclaimable", WORKER)
    assert all(job(job_id).status == "queued" and job(job_id).attempt == 0 for job_id in behind)
    assert sorted(c.lease.job_id for c in claim()) == sorted(behind)


def test_set_aside_leaves_jobs_waiting_on_a_busy_lock_key_alone():
    enqueue(task="t", lock_key="shared")
    claim()
    waiting = enqueue(task="t", lock_key="shared")

    assert services.jobs_set_aside_unclaimable(queue="default", limit=10, worker_id=WORKER) == []
    assert job(waiting.job_id).status == "queued"


def test_a_refused_outcome_is_an_error_of_its_own_statement_only():
    [claimed] = claim_one_of(enqueue(task="t"))

    with pytest.raises(DatabaseError):
        services.jobs_complete(
            outcomes=[services.Outcome(lease=claimed.lease, kind="succeeded", result={"x": float("nan")})],
            worker_id=WORKER,
        )

    assert job(claimed.lease.job_id).status == "running"  # nothing written; the worker's recorder decides


def claim_one_of(enqueued):
    return [c for c in claim() if c.lease.job_id == enqueued.job_id]


def test_heartbeat_renews_held_leases_and_reports_cancellation():
    kept, canceled = (enqueue(task="t") for _ in range(2))
    claimed = claim()
    Job.objects.filter(job_id=canceled.job_id).update(cancel_requested=True)
    Job.objects.update(lease_expires_at=timezone.now() + timedelta(seconds=1))

    held = services.jobs_heartbeat(leases=[c.lease for c in claimed], worker_id=WORKER)

    assert held == {kept.job_id: False, canceled.job_id: True}
    assert job(kept.job_id).lease_expires_at > timezone.now() + timedelta(seconds=50)
    assert kinds(kept.job_id)[-1] == "heartbeat"


def test_success_is_recorded_with_its_result():
    enqueued = enqueue(task="t")
    claimed = claim()

    statuses = succeed(claimed, result={"rows": 3})

    assert statuses == {enqueued.job_id: "succeeded"}
    row = job(enqueued.job_id)
    assert row.status == "succeeded" and row.finished_at and row.lease_expires_at is None
    done = JobEvent.objects.get(job_id=enqueued.job_id, kind="done")
    assert done.payload["result"] == {"rows": 3} and done.payload["attempt"] == 1


def test_an_error_retries_with_backoff_until_attempts_are_spent():
    enqueued = enqueue(task="t", max_attempts=2)

    def fail_once():
        claimed = claim()
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
    claimed = claim()

    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed[0].lease, kind="error", retry_delay_sec=60)], worker_id=WORKER
    )

    assert job(claimed[0].lease.job_id).available_at > timezone.now() + timedelta(seconds=55)
    assert claim() == []


@pytest.mark.parametrize(("kind", "status"), [("fatal", "failed"), ("canceled", "canceled")])
def test_fatal_and_canceled_outcomes_end_the_job(kind, status):
    enqueued = enqueue(task="t")
    claimed = claim()

    services.jobs_complete(
        outcomes=[services.Outcome(lease=claimed[0].lease, kind=kind, error="stop")], worker_id=WORKER
    )

    assert job(enqueued.job_id).status == status
    assert kinds(enqueued.job_id)[-1] == status


def test_a_worker_that_lost_its_lease_cannot_overwrite_the_job():
    enqueued = enqueue(task="t", lease_ttl_sec=3)
    stale = claim()[0]
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.jobs_reap()
    fresh = claim()[0]  # another worker took it: attempt 2

    assert succeed([stale]) == {}
    assert services.jobs_heartbeat(leases=[stale.lease], worker_id=WORKER) == {}
    assert services.job_progress(lease=stale.lease, progress={"x": 1}) is None
    assert services.jobs_release(leases=[stale.lease], worker_id=WORKER, reason="worker_shutdown") == 0
    row = job(enqueued.job_id)
    assert (row.status, row.attempt, row.progress) == ("running", 2, {})
    assert succeed([fresh]) == {enqueued.job_id: "succeeded"}


def test_release_gives_jobs_back_without_delay_or_a_spent_attempt():
    enqueued = enqueue(task="t")
    [released] = claim()

    assert services.jobs_release(leases=[released.lease], worker_id=WORKER, reason="worker_shutdown") == 1

    row = job(enqueued.job_id)
    assert (row.status, row.attempt, row.started_at, row.lease_expires_at) == ("queued", 0, None, None)
    assert row.available_at <= timezone.now()
    event = JobEvent.objects.filter(job_id=enqueued.job_id).last()
    assert (event.kind, event.payload["reason"], event.payload["attempt_returned"]) == ("requeue", "worker_shutdown", 1)
    [again] = claim()
    assert again.lease.attempt == 1 and again.lease.started_at != released.lease.started_at
    assert succeed([released]) == {}  # the released run's lease matches nothing any more


def test_deploys_never_spend_attempts():
    enqueued = enqueue(task="t", max_attempts=2)
    for _deploy in range(5):
        [running] = claim()
        services.jobs_release(leases=[running.lease], worker_id=WORKER, reason="worker_shutdown")

    assert job(enqueued.job_id).status == "queued"
    assert succeed(claim()) == {enqueued.job_id: "succeeded"}


def test_progress_is_stored_and_reports_cancellation():
    enqueued = enqueue(task="t")
    lease = claim()[0].lease

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

    assert (reaped.requeued, reaped.lost) == (1, 1)
    assert job(retry.job_id).status == "queued" and job(retry.job_id).attempt == 1
    assert job(spent.job_id).status == "lost" and job(spent.job_id).finished_at
    assert job(alive.job_id).status == "running"
    requeue = JobEvent.objects.filter(job_id=retry.job_id).last()
    assert requeue.kind == "requeue" and requeue.payload["reason"] == "lease_expired"
    assert kinds(spent.job_id)[-1] == "lost"


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

    pruned = services.jobs_prune(older_than_sec=7 * 86400, max_identical=2, finished_within_sec=60, budget_sec=10)

    assert pruned == 4  # the 30-day-old job and the three oldest identical ones
    kept = set(Job.objects.values_list("job_id", flat=True))
    assert kept == {identical[0].job_id, identical[1].job_id, different.job_id, unfinished.job_id}
    assert not JobEvent.objects.filter(job_id=old.job_id).exists()  # the journal goes with the job


def test_retention_deletes_in_batches_and_stops_at_its_budget():
    specs = [services.JobSpec(queue="default", task="t", args={"n": n % 2}, lock_key=f"k{n}") for n in range(50)]
    services.job_enqueue_many(specs=specs)
    Job.objects.filter(args={"n": 0}).update(status="succeeded", finished_at=timezone.now() - timedelta(days=30))
    Job.objects.filter(args={"n": 1}).update(status="succeeded", finished_at=timezone.now())

    def prune(**options):
        return services.jobs_prune(older_than_sec=86400, max_identical=2, finished_within_sec=60, **options)

    assert prune(budget_sec=0) == 0  # out of time before the first batch
    assert prune(budget_sec=10, batch=10) == 25 + 23  # 3 batches of old ones, 3 of identical ones
    assert Job.objects.count() == 2


# --- cancel, retry, delete ------------------------------------------------------------------


def test_cancel_of_a_queued_job_is_immediate():
    enqueued = enqueue(task="t")

    assert services.job_cancel(job_id=enqueued.job_id, requested_by="ops") == "canceled"

    row = job(enqueued.job_id)
    assert row.status == "canceled" and row.finished_at and row.cancel_requested
    assert JobEvent.objects.filter(job_id=enqueued.job_id).last().payload == {"by": "ops", "while": "queued"}
    assert claim() == []


def test_cancel_of_a_running_job_is_requested_and_announced():
    enqueued = enqueue(task="t")
    claim()
    with listening("default", CANCEL_CHANNEL) as received:
        assert services.job_cancel(job_id=enqueued.job_id) == "running"

        assert received() == [str(enqueued.job_id)]
    assert job(enqueued.job_id).cancel_requested is True


def test_cancel_of_a_finished_job_conflicts_and_a_repeat_cancel_is_harmless():
    done = enqueue(task="t")
    succeed(claim())
    canceled = enqueue(task="t")
    services.job_cancel(job_id=canceled.job_id)

    with pytest.raises(ConflictError) as error:
        services.job_cancel(job_id=done.job_id)
    assert error.value.details["status"] == "succeeded"
    assert services.job_cancel(job_id=canceled.job_id) == "canceled"
    with pytest.raises(NotFoundError):
        services.job_cancel(job_id=uuid.uuid4())


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


# --- periodic tasks ---------------------------------------------------------------------


def test_a_periodic_task_runs_once_per_period_across_processes():
    runs = []

    def work():
        runs.append(1)
        return {"did": len(runs)}

    first = services.periodic_task_run(name="test.task", period_sec=60, runner="a", work=work)
    again = services.periodic_task_run(name="test.task", period_sec=60, runner="b", work=work)

    assert (first.ran, first.result, first.due_in_sec) == (True, {"did": 1}, 60)
    assert not again.ran and 0 < again.due_in_sec <= 60
    assert len(runs) == 1
    row = PeriodicTask.objects.get(name="test.task")
    assert (row.last_runner, row.last_result) == ("a", {"did": 1}) and row.last_finished_at >= row.last_started_at


def test_a_periodic_task_is_skipped_while_another_process_runs_it():
    with raw_connection("default") as other, other.transaction():
        other.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [services.PERIODIC_LOCK_SPACE, "test.task"])
        skipped = services.periodic_task_run(name="test.task", period_sec=5, runner="b", work=lambda: {"ran": 1})

    assert not skipped.ran and not PeriodicTask.objects.filter(name="test.task", last_started_at__isnull=False)


def test_concurrent_runners_run_a_due_task_once():
    ran = []

    def work():
        ran.append(1)
        time.sleep(0.3)  # long enough for the others to arrive while it runs
        return {}

    results = run_in_threads(
        4, lambda index: services.periodic_task_run(name="test.task", period_sec=60, runner=str(index), work=work).ran
    )

    assert sorted(results) == [False, False, False, True] and len(ran) == 1


def test_a_failed_periodic_run_records_nothing_so_the_next_try_runs_it():
    def broken():
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        services.periodic_task_run(name="test.task", period_sec=60, runner="a", work=broken)

    assert services.periodic_task_run(name="test.task", period_sec=60, runner="a", work=dict).ran
