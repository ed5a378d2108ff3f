"""Why a queued job has not run: its due time, the jobs it waits for, and each hold of its queue
(paused, no live worker, at its limits, its lock key busy), as the job's page says it."""

import re
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.queue import services
from jobs.queue.console.job_page import RunAttempts
from jobs.queue.console.job_waits import pending_upstream, queue_holds, state_line
from jobs.queue.models import Job, QueueStart
from jobs.queue.selectors import job_dependencies
from jobs.queue.states import shown_state
from tests.conftest import ALL_DATABASES

pytestmark = ALL_DATABASES


def enqueue(queue="q", lock_key=None, **fields) -> Job:
    spec = services.JobSpec(queue=queue, task="reports.build", lock_key=lock_key or f"k-{uuid.uuid4()}", **fields)
    return Job.objects.get(job_id=services.job_enqueue(spec=spec).job_id)


def line_of(job: Job) -> str:
    job.refresh_from_db()
    state = shown_state(job.status, job.available_at, job.attempt, timezone.now())
    upstream = job_dependencies(job_id=job.job_id)["upstream"]
    line = state_line(job, state=state, attempts=RunAttempts(job.attempt, job.max_attempts, 1), upstream=upstream)
    return f"{line.state} · {re.sub(r'<[^>]+>', '', line.text)}"


@pytest.fixture
def served():
    """A live worker serving queue q."""
    services.worker_register(worker_id=uuid.uuid4(), hostname="h", pid=1, queues={"q": 2})


def test_a_job_due_later_says_when_with_a_countdown(served):
    at = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    scheduled = enqueue(available_at=at)
    retried = enqueue(available_at=at)
    Job.objects.filter(job_id=retried.job_id).update(attempt=2)

    shown = f"{at:%Y-%m-%d %H:%M:%S} UTC"
    assert re.fullmatch(rf"scheduled · due {shown} \(in 59 min 5\d s\)", line_of(scheduled))
    assert re.fullmatch(rf"retryable · next attempt 3 of 5 at {shown} \(in 59 min 5\d s\)", line_of(retried))
    retried.refresh_from_db()
    html = state_line(retried, state="retryable", attempts=RunAttempts(2, 5, 1), upstream=[]).text
    assert f'<time class="countdown" datetime="{at.isoformat()}"' in html


def test_a_waiting_job_names_the_jobs_it_still_waits_for(served):
    upstream = [enqueue() for _ in range(7)]
    Job.objects.filter(job_id=upstream[0].job_id).update(status="succeeded")
    waiting = enqueue(depends_on=[job.job_id for job in upstream])

    text = line_of(waiting)
    assert text.startswith("waiting · for 6 jobs: reports.build, ") and text.endswith(" and 1 more")
    html = state_line(
        waiting, state="waiting", attempts=None, upstream=job_dependencies(job_id=waiting.job_id)["upstream"]
    ).text
    assert html.count('href="/admin/jobs/job/') == 5 and str(upstream[0].job_id) not in html
    assert pending_upstream([waiting.job_id, upstream[1].job_id]) == {waiting.job_id: 6}


def test_a_paused_queue_and_one_no_live_worker_serves_hold_every_queued_job():
    available, waiting = enqueue(), enqueue(depends_on=[enqueue().job_id])

    assert line_of(available) == "available · no live worker serves queue q"
    services.worker_register(worker_id=uuid.uuid4(), hostname="h", pid=1, queues={"other": 1})
    services.queue_pause(queue="q", by="ops")
    assert line_of(available) == "available · queue paused · no live worker serves queue q"
    assert line_of(waiting).endswith("· queue paused · no live worker serves queue q")
    services.worker_register(worker_id=uuid.uuid4(), hostname="h", pid=2, queues={"q": 1})
    services.queue_resume(queue="q", by="ops")
    assert line_of(available) == "available · "
    assert queue_holds(["q", "other", "idle"]) == {"q": [], "other": [], "idle": ["no live worker serves queue idle"]}


def test_a_queue_at_its_limits_holds_its_due_jobs(served):
    running = [enqueue(partition_key="eu") for _ in range(2)]
    Job.objects.filter(job_id__in=[job.job_id for job in running]).update(status="running", attempt=1)
    due = enqueue(partition_key="eu")
    services.queue_limits_set(queue="q", max_running=2, by="ops")
    assert line_of(due) == "available · queue at its limit (max_running 2, 2 running)"

    services.queue_limits_set(queue="q", max_running=2, per_partition=True, by="ops")
    assert line_of(due) == "available · queue at its limit (max_running 2, 2 running in partition eu)"
    assert line_of(enqueue(partition_key="us")) == "available · "

    services.queue_limits_set(queue="q", rate_limit=3, rate_period_sec=60, by="ops")
    QueueStart.objects.bulk_create([QueueStart(queue="q", partition_key="eu", started_at=timezone.now())] * 3)
    assert line_of(due) == "available · queue at its rate limit (3 per 60 s, 3 started)"


def test_a_busy_lock_key_holds_a_due_job(served):
    first, second = enqueue(lock_key="tenant-7"), enqueue(lock_key="tenant-7")

    assert line_of(first) == "available · "
    assert line_of(second) == "available · after job reports.build of its lock key"
    Job.objects.filter(job_id=first.job_id).update(status="running", attempt=1)
    assert line_of(second) == "available · its lock key is held by running job reports.build"
    assert line_of(Job.objects.get(job_id=first.job_id)) == "running · "
