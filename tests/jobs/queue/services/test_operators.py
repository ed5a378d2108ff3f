"""Operators' actions over one job or every job a filter matches: one statement, a journal row each."""

import pytest
from django.db import IntegrityError
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import CANCEL_CHANNEL, QUEUES_CHANNEL, Job, JobEvent, Queue
from pipeline_project.api.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening, run_in_threads
from tests.jobs.conftest import enqueue, job, kinds

pytestmark = ALL_DATABASES_COMMITTED


def jobs_in(statuses: dict[str, int], **fields) -> dict[str, list]:
    """``{status: count}`` jobs, set straight into those statuses; returns their ids by status."""
    made: dict[str, list] = {}
    for status, count in statuses.items():
        for _ in range(count):
            enqueued = enqueue(task="t", **fields)
            if status != "queued":
                Job.objects.filter(job_id=enqueued.job_id).update(status=status, finished_at=timezone.now())
            made.setdefault(status, []).append(enqueued.job_id)
    return made


def matching(**filters) -> services.Selection:
    return services.Selection.of_queryset(Job.objects.filter(**filters))


def test_retry_every_job_a_filter_matches_with_a_preview_first():
    made = jobs_in({"failed": 3, "lost": 1, "succeeded": 2, "queued": 1}, queue="reports")
    jobs_in({"failed": 2}, queue="other")

    preview = services.jobs_retry(selection=matching(queue="reports"), by="ops", dry_run=True)
    assert (preview.matched, preview.changed, preview.skipped, preview.dry_run) == (7, 4, 3, True)
    assert Job.objects.filter(status="queued").count() == 1  # a preview changes nothing

    done = services.jobs_retry(selection=matching(queue="reports"), by="ops")

    assert (done.matched, done.changed, done.skipped) == (7, 4, 3)
    for job_id in made["failed"] + made["lost"]:
        row = job(job_id)
        assert (row.status, row.attempt, row.max_attempts, row.finished_at) == ("queued", 0, 5, None)
        assert JobEvent.objects.filter(job_id=job_id).last().payload == {
            "reason": "retry_requested",
            "by": "ops",
            "run": 2,
            "first_attempt": 1,
            "max_attempts": 5,
        }
    assert Job.objects.filter(queue="other", status="failed").count() == 2


def test_cancel_every_matching_job_queued_at_once_running_by_request():
    queued = [enqueue(task="t", args={"batch": 7}).job_id for _ in range(4)]
    [claimed] = services.jobs_claim(queue="default", limit=1, worker_id="w")  # the oldest
    running_id = queued.pop(0)
    assert claimed.lease.job_id == running_id
    jobs_in({"succeeded": 1}, args={"batch": 7})

    with listening("default", CANCEL_CHANNEL) as cancels:
        done = services.jobs_cancel(selection=matching(args__contains={"batch": 7}), by="ops")
        assert cancels() == [str(running_id)]

    assert (done.matched, done.changed, done.requested, done.skipped) == (5, 3, 1, 1)
    assert all(job(job_id).status == "canceled" and kinds(job_id)[-1] == "canceled" for job_id in queued)
    assert job(running_id).status == "running" and job(running_id).cancel_requested


def test_delete_every_matching_job_except_running_ones_unless_forced():
    made = jobs_in({"succeeded": 4, "failed": 1})
    enqueue(task="t")
    [claimed] = services.jobs_claim(queue="default", limit=1, worker_id="w")

    preview = services.jobs_delete(selection=matching(queue="default"), dry_run=True)
    assert (preview.matched, preview.changed, preview.skipped) == (6, 5, 1)

    done = services.jobs_delete(selection=matching(queue="default"))
    assert (done.matched, done.changed, done.skipped) == (6, 5, 1)
    assert list(Job.objects.values_list("job_id", flat=True)) == [claimed.lease.job_id]
    assert not JobEvent.objects.filter(job_id__in=made["succeeded"]).exists()  # journals go with their jobs

    assert services.jobs_delete(selection=matching(queue="default"), force=True).changed == 1


def test_a_large_selection_is_one_statement_per_action(django_assert_max_num_queries):
    services.job_enqueue_many(specs=[services.JobSpec(queue="bulk", task="t", lock_key=f"k{i}") for i in range(3000)])
    Job.objects.filter(queue="bulk").update(status="failed", finished_at=timezone.now())

    with django_assert_max_num_queries(1):
        done = services.jobs_retry(selection=matching(queue="bulk", status="failed"), by="ops")

    assert done.changed == 3000 and JobEvent.objects.filter(kind="requeue").count() == 3000


# --- retry: a new run, its attempts numbered on --------------------------------------------


def run_to_the_end(job_id, *, outcome: str = "error") -> list[int]:
    """Claim and fail the job until it stops coming back; return the attempts its leases had."""
    attempts = []
    while job(job_id).status == "queued":
        [claimed] = services.jobs_claim(queue="default", limit=1, worker_id="w")
        attempts.append(claimed.lease.attempt)
        services.jobs_complete(
            outcomes=[services.Outcome(lease=claimed.lease, kind=outcome, error=f"boom {claimed.lease.attempt}")],
            worker_id="w",
        )
    return attempts


def test_a_retried_job_numbers_its_attempts_on_with_a_full_run_each_time():
    job_id = enqueue(task="t", max_attempts=2).job_id
    assert run_to_the_end(job_id) == [1, 2]

    assert services.job_retry(job_id=job_id, requested_by="ops") is True
    assert (job(job_id).attempt, job(job_id).max_attempts) == (2, 4)
    assert run_to_the_end(job_id) == [3, 4]
    services.job_retry(job_id=job_id, requested_by="ops")
    assert run_to_the_end(job_id) == [5, 6]

    retries = [e.payload for e in JobEvent.objects.filter(job_id=job_id, payload__reason="retry_requested")]
    assert [(p["run"], p["first_attempt"], p["max_attempts"]) for p in retries] == [(2, 3, 4), (3, 5, 6)]
    failed = JobEvent.objects.filter(job_id=job_id, payload__has_key="error")
    assert [(e.payload["attempt"], e.payload["error"]) for e in failed] == [(n, f"boom {n}") for n in range(1, 7)]


@pytest.mark.parametrize(
    ("status", "attempt", "expected_max"),
    [("failed", 1, 6), ("lost", 5, 10), ("canceled", 0, 5), ("canceled", 3, 8)],  # a fatal error, lost, canceled
)
def test_a_retry_gives_the_job_as_many_attempts_again_whatever_its_run_used(status, attempt, expected_max):
    job_id = enqueue(task="t").job_id  # max_attempts 5
    Job.objects.filter(job_id=job_id).update(status=status, attempt=attempt, error="x", finished_at=timezone.now())

    assert services.job_retry(job_id=job_id, requested_by="ops") is True

    row = job(job_id)
    assert (row.status, row.attempt, row.max_attempts) == ("queued", attempt, expected_max)
    assert (row.error, row.finished_at, row.started_at, row.cancel_requested) == (None, None, None, False)


def test_a_lease_from_before_an_operator_retry_stays_invalid():
    job_id = enqueue(task="t").job_id
    [stale] = services.jobs_claim(queue="default", limit=1, worker_id="w")
    Job.objects.filter(job_id=job_id).update(status="lost")
    services.job_retry(job_id=job_id)
    [fresh] = services.jobs_claim(queue="default", limit=1, worker_id="w")

    assert (stale.lease.attempt, fresh.lease.attempt) == (1, 2)
    done = [services.Outcome(lease=stale.lease, kind="succeeded")]
    assert services.jobs_complete(outcomes=done, worker_id="w") == {}
    done = [services.Outcome(lease=fresh.lease, kind="succeeded")]
    assert services.jobs_complete(outcomes=done, worker_id="w") == {job_id: "succeeded"}


def test_a_retry_journal_row_written_by_hand_does_not_break_the_next_retry():
    job_id = enqueue(task="t").job_id
    Job.objects.filter(job_id=job_id).update(status="failed", attempt=5)
    maxima = []
    for payload in [{"reason": "retry_requested", "run": "two", "first_attempt": 1e30}, {"reason": "retry_requested"}]:
        JobEvent.objects.create(job_id=job_id, queue="default", kind="requeue", payload=payload)
        assert services.job_retry(job_id=job_id) is True
        maxima.append(job(job_id).max_attempts)
        Job.objects.filter(job_id=job_id).update(status="failed")

    # A run said to start past int4 leaves nothing to add; a row without numbers reads as run 1 from attempt 1.
    assert maxima == [5, 10]
    assert JobEvent.objects.filter(job_id=job_id).last().payload["run"] == 2


def test_two_operators_retrying_one_job_at_once_start_one_run():
    job_id = enqueue(task="t").job_id
    Job.objects.filter(job_id=job_id).update(status="failed", attempt=5)

    changed = run_in_threads(8, lambda _index: services.job_retry(job_id=job_id, requested_by="ops"))

    assert changed.count(True) == 1
    assert (job(job_id).attempt, job(job_id).max_attempts) == (5, 10)
    assert JobEvent.objects.filter(job_id=job_id, payload__reason="retry_requested").count() == 1


def test_a_selection_names_its_positional_parameters():
    """A queryset's SQL comes with ``%s`` placeholders; the statements that embed it add named ones."""
    selection = services.Selection("SELECT job_id FROM dl_jobs WHERE queue = %s AND task LIKE '%%' || %s", ("q", "t"))

    assert (
        selection.sql
        == "SELECT job_id FROM dl_jobs WHERE queue = %(selection_0)s AND task LIKE '%%' || %(selection_1)s"
    )
    assert selection.params == {"selection_0": "q", "selection_1": "t"}
    assert services.Selection("SELECT 1", {"a": 1}).params == {"a": 1}


def test_a_filter_with_a_pattern_selects_its_jobs():
    made = jobs_in({"failed": 2}, queue="reports.daily")
    jobs_in({"failed": 1}, queue="other")

    done = services.jobs_retry(selection=matching(queue__contains="%ts.d"), by="ops", dry_run=True)
    assert done.matched == 0  # a % in the value is a character to match, not a wildcard

    done = services.jobs_retry(selection=matching(queue__startswith="reports."), by="ops")
    assert (done.matched, done.changed) == (len(made["failed"]), 2)


def test_setting_queue_limits_wakes_the_workers_and_names_bad_fields():
    with listening("default", QUEUES_CHANNEL) as received:
        limits = services.queue_limits_set(queue="reports", by="ops", max_running=3, per_partition=True, create=True)
        assert received() == ["reports"]
    assert limits == services.QueueLimits("reports", 3, None, None, True)
    queue = Queue.objects.get(name="reports")
    assert (queue.max_running, queue.limit_per_partition, queue.changed_by, queue.paused) == (3, True, "ops", False)

    for bad, field in [
        ({"max_running": True}, "max_running"),
        ({"rate_limit": 2**31}, "rate_limit"),
        ({"rate_limit": 1}, "rate_period_sec"),
    ]:
        with pytest.raises(InvalidInputError) as error:
            services.queue_limits_set(queue="reports", by="ops", **bad)
        assert list(error.value.details) == [field]
    with pytest.raises(IntegrityError):  # the table's own check, for writes that bypass the service
        Queue.objects.filter(name="reports").update(max_running=0)
