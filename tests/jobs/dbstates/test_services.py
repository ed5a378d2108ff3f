"""Prepare job bookkeeping: cancel of a queued job, retention per signature, events in order."""

import pytest

from jobs.dbstates import config, services
from jobs.dbstates.engine import statefs
from jobs.dbstates.models import PrepareEvent, PrepareJob
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.dbstates.helpers import prepare, prepared

pytestmark = ALL_DATABASES_COMMITTED


def test_a_queued_job_cancelled_ends_failed_at_once():
    job = prepare(["-c", "SELECT 1"])

    was_active = services.prepare_job_cancel(job_id=job.job_id)

    ended = PrepareJob.objects.get(job_id=job.job_id)
    assert was_active and ended.status == "failed" and ended.error["code"] == "cancelled"
    assert list(PrepareEvent.objects.filter(job_id=job.job_id).values_list("type", "status")) == [
        ("status", "queued"),
        ("error", ""),
        ("status", "failed"),
    ]
    assert services.prepare_job_cancel(job_id=job.job_id) is False


def test_retention_keeps_the_newest_finished_jobs_of_a_signature():
    config.config_set(path="orchestrator.jobs.maxIdentical", value=2)
    jobs = [prepared(["-c", "CREATE TABLE kept (a int)"]) for _ in range(3)]
    other = prepared(["-c", "CREATE TABLE other (a int)"])

    remaining = set(PrepareJob.objects.values_list("job_id", flat=True))
    assert remaining == {jobs[1].job_id, jobs[2].job_id, other.job_id}
    assert not statefs.job_dir(jobs[0].job_id).exists()


def test_unknown_job_is_not_found():
    from pipeline_project.api.errors import NotFoundError

    with pytest.raises(NotFoundError):
        services.prepare_job_cancel(job_id="0" * 32)


def test_a_job_whose_queue_job_ended_without_it_is_failed_by_reconciliation():
    from jobs.queue.models import Job

    orphan = prepare(["-c", "SELECT 1"])
    Job.objects.filter(job_id=orphan.queue_job_id).update(status="lost")
    waiting = prepare(["-c", "SELECT 2"])

    assert services.prepare_jobs_reconcile() == {"ended": 1}

    orphan.refresh_from_db()
    waiting.refresh_from_db()
    assert orphan.status == "failed" and orphan.error["code"] == "internal_error"
    assert waiting.status == "queued"
