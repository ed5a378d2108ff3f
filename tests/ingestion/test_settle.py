"""Settling runs (the ``ingestion.settle`` periodic task): a run ends once all its jobs have."""

from ingestion import services
from ingestion.models import IngestionRun
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES
from tests.ingestion.helpers import item, new_run
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES


def job_of(run, *, status: str, error: str | None = None) -> None:
    queued = enqueue(task="test.echo", args={"run_id": str(run.id), "source_id": run.source_id})
    Job.objects.filter(job_id=queued.job_id).update(status=status, error=error)


def settled(run) -> IngestionRun:
    return IngestionRun.objects.get(id=run.id)


def test_a_running_run_whose_jobs_all_succeeded_completes():
    run = new_run()
    services.run_update(run_id=run.id, status="running")
    job_of(run, status="succeeded")

    assert services.runs_settle() == {"ended": 1}
    assert (settled(run).status, settled(run).active_stage) == ("completed", "summary")


def test_a_run_with_a_failed_item_fails_naming_it():
    run = new_run()
    services.run_update(run_id=run.id, status="running")
    services.items_upsert(items=[item(run, status="failed", error_message="HTTP 404 from http://x/a.pdf")])
    job_of(run, status="succeeded")

    services.runs_settle()

    assert settled(run).status == "failed"
    assert settled(run).error_message == "1 item(s) failed (discovery: HTTP 404 from http://x/a.pdf)"


def test_a_run_with_jobs_still_queued_or_running_stays():
    run = new_run()
    services.run_update(run_id=run.id, status="running")
    job_of(run, status="succeeded")
    job_of(run, status="running")

    assert services.runs_settle() == {"ended": 0}
    assert settled(run).status == "running"


def test_a_pending_run_whose_jobs_ended_before_any_step_ran_fails_once():
    run = new_run()
    job_of(run, status="succeeded")  # a job that carries its run_id but is no step of it

    assert services.runs_settle() == {"ended": 1}
    assert settled(run).status == "failed"
    assert settled(run).error_message == "the run's jobs ended before any of its steps ran"
    assert services.runs_settle() == {"ended": 0}  # not counted again every period
