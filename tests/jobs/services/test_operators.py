"""Operators' actions over one job or every job a filter matches: one statement, a journal row each."""

from django.utils import timezone

from jobs import services
from jobs.models import CANCEL_CHANNEL, Job, JobEvent
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import listening
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
        assert (row.status, row.attempt, row.finished_at) == ("queued", 0, None)
        assert JobEvent.objects.filter(job_id=job_id).last().payload == {"reason": "retry_requested", "by": "ops"}
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
