"""The queue's recorder's writes (``jobs.queue.worker.results``): a result the database refuses fails its job alone."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from jobs.queue import services
from jobs.queue.handlers import JobContext, registry
from jobs.queue.models import Job
from jobs.queue.worker.runs import JobRun
from jobs.queue.worker.source import QueueSource
from jobs.runtime.config import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, job

pytestmark = ALL_DATABASES_COMMITTED


def finished_run(job: services.ClaimedJob, result) -> JobRun:
    """A run of ``job`` that succeeded with ``result``, as handler threads hand it to the recorder."""
    outcome = services.Outcome(lease=job.lease, kind="succeeded", result=result)
    return JobRun(context=JobContext(job, "w"), started=0.0, renew_every=1.0, renew_at=0.0, outcome=outcome)


def runs_logged(caplog) -> list:
    return [record for record in caplog.records if record.name == "jobs.queue.worker.runs"]


def lost_leases_logged(caplog) -> list[str]:
    """The job ids of the lost leases logged."""
    return [record.job_id for record in runs_logged(caplog) if record.outcome == "lease_lost"]


def test_a_result_the_database_refuses_fails_that_job_alone(caplog):
    jobs = [enqueue(task="t", max_attempts=3) for _ in range(3)]
    claimed = services.jobs_claim(queue="default", limit=3, worker_id="w")
    source = QueueSource(WorkerConfig.from_settings({"queue": {"default": 3}}), registry)
    refused_job = claimed[1].lease.job_id
    # Past the handler's own check (as a bug of ours might be): the statement for the batch fails.
    results = [finished_run(job, value) for job, value in zip(claimed, [1, float("nan"), 3], strict=True)]

    source.recorder.submit(results)
    source.recorder.flush()

    statuses = {job_id: job(job_id).status for job_id in (item.job_id for item in jobs)}
    assert statuses[refused_job] == "failed"
    assert [status for job_id, status in statuses.items() if job_id != refused_job] == ["succeeded", "succeeded"]
    assert "could not be stored" in job(refused_job).error
    assert sorted(status for _running, status in source._recorded) == ["failed", "succeeded", "succeeded"]
    source.collect()
    [failure] = runs_logged(caplog)  # the job's failure, as any run's (``jobs.queue.worker.runs``)
    assert (failure.levelname, failure.job_id, failure.outcome) == ("ERROR", str(refused_job), "failed")
    assert failure.error.startswith("The run's result could not be stored: ")


def test_a_result_written_again_after_its_answer_was_lost_is_not_taken_for_a_lost_lease(monkeypatch, caplog):
    enqueued = enqueue(task="t")
    [claimed] = services.jobs_claim(queue="default", limit=1, worker_id="w")
    source = QueueSource(WorkerConfig.from_settings({"queue": {"default": 1}}), registry)
    complete = services.jobs_complete
    answers = iter(["lost"])

    def write_then_lose_the_first_answer(**kwargs):
        written = complete(**kwargs)
        if next(answers, None) == "lost":
            raise OperationalError("server closed the connection unexpectedly")
        return written

    monkeypatch.setattr(services, "jobs_complete", write_then_lose_the_first_answer)
    running = finished_run(claimed, 1)
    source._running[claimed.lease.job_id] = running
    source.recorder.submit([running])
    with pytest.raises(OperationalError):
        source.recorder.flush()
    source.recorder.flush()  # the retry: the job is finished, so no lease matches
    source.collect()

    assert running.written_in_doubt and job(enqueued.job_id).status == "succeeded"
    assert lost_leases_logged(caplog) == []


def test_results_whose_leases_were_lost_are_logged_once_each(caplog):
    for _ in range(3):
        enqueue(task="t")
    claimed = services.jobs_claim(queue="default", limit=3, worker_id="w")
    Job.objects.update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    services.jobs_reap()  # a frozen worker's leases, taken away
    source = QueueSource(WorkerConfig.from_settings({"queue": {"default": 3}}), registry)
    source.recorder.submit([finished_run(job, 1) for job in claimed])
    source.recorder.flush()
    source.collect()

    assert sorted(lost_leases_logged(caplog)) == sorted(str(job.lease.job_id) for job in claimed)
