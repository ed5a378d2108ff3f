"""The job page's questions before Retry, Cancel and Delete: what changes, and how many jobs."""

import uuid

from jobs.queue import services
from jobs.queue.console.job_actions import cancel_question, delete_question, retry_question
from jobs.queue.console.job_page import RunAttempts
from jobs.queue.models import Job, JobEvent
from jobs.queue.selectors import job_dependencies
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def enqueue(**fields) -> Job:
    spec = services.JobSpec(queue="reports", task="reports.build", lock_key=f"k-{uuid.uuid4()}", **fields)
    return Job.objects.get(job_id=services.job_enqueue(spec=spec).job_id)


def fail(job: Job, *, attempt: int) -> Job:
    Job.objects.filter(job_id=job.job_id).update(status="failed", attempt=attempt)
    job.refresh_from_db()
    return job


def test_retry_says_which_run_its_attempts_and_how_max_attempts_changes():
    job = fail(enqueue(), attempt=1)  # a fatal error at attempt 1 of 5

    assert retry_question(job) == (
        "Retry this job? It runs again in queue reports as run 2, with up to 5 attempts "
        "(the job's attempts 2 to 6: max_attempts 5 → 6)."
    )
    services.job_retry(job_id=job.job_id)
    job = fail(job, attempt=6)
    assert "as run 3, with up to 5 attempts (the job's attempts 7 to 11: max_attempts 6 → 11)" in retry_question(job)
    never_ran = enqueue(max_attempts=1)
    Job.objects.filter(job_id=never_ran.job_id).update(status="canceled")
    never_ran.refresh_from_db()
    assert "with up to 1 attempt (the job's attempts 1 to 1: max_attempts stays 1)" in retry_question(never_ran)


def test_retry_counts_the_jobs_its_end_canceled_that_come_back():
    upstream = enqueue()
    dependents = [enqueue(depends_on=[upstream.job_id]) for _ in range(2)]
    upstream = fail(upstream, attempt=1)  # its end cancels both (the dependency rules)
    assert set(Job.objects.filter(job_id__in=[j.job_id for j in dependents]).values_list("status", flat=True)) == {
        "canceled"
    }

    assert retry_question(upstream).endswith(" 2 jobs its end canceled will wait for it again.")


def test_cancel_and_delete_count_the_jobs_waiting_for_it_and_its_events():
    job = enqueue()
    enqueue(depends_on=[job.job_id])
    enqueue(depends_on=[job.job_id], run_anyway=True)  # runs anyway: not canceled
    JobEvent.objects.create(job=job, queue=job.queue, kind="picked", payload={"attempt": 1})
    dependencies = job_dependencies(job_id=job.job_id)

    assert cancel_question(job, dependencies=dependencies, attempts=RunAttempts(0, 5, 1)) == (
        "Cancel this job? It leaves queue reports at once and will not run. 1 job waiting for it will be canceled too."
    )
    assert delete_question(job, dependencies=dependencies) == (
        "Delete this queued job and its 2 events? This cannot be undone. 1 job waiting for it will be canceled too."
    )
    Job.objects.filter(job_id=job.job_id).update(status="running", attempt=1)
    job.refresh_from_db()
    assert cancel_question(job, dependencies=dependencies, attempts=RunAttempts(1, 5, 1)).startswith(
        "Ask this running job to stop? Its worker is told at once; the job ends canceled when its handler stops "
        "(attempt 1 of 5)."
    )
