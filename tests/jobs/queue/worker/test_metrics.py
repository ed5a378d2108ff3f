"""Prometheus: queue depth read at scrape time, worker counters."""

from datetime import timedelta

from django.utils import timezone
from prometheus_client import REGISTRY

from jobs.queue import services
from jobs.queue.models import Job
from jobs.queue.worker.housekeeping import reap_expired_leases
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED


def sample(name: str, **labels) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_metrics_endpoint_reports_queue_depth_and_live_workers(api):
    for _ in range(3):
        enqueue(task="test.echo", queue="reports")
    enqueue(task="test.echo", queue="other")

    text = api.get("/metrics").content.decode()

    assert 'dl_queue_depth{queue="reports",status="queued"} 3.0' in text
    assert 'dl_queue_depth{queue="other",status="queued"} 1.0' in text
    assert "dl_live_workers 0.0" in text


def test_worker_counts_claims_outcomes_and_processing_time():
    before = {
        "claimed": sample("dl_jobs_claimed_total", queue="default"),
        "succeeded": sample("dl_jobs_succeeded_total", queue="default", task="test.echo"),
        "failed": sample("dl_jobs_failed_total", queue="default", task="test.fail"),
        "retried": sample("dl_jobs_retried_total", queue="default", task="test.fail"),
        "timed": sample("dl_job_processing_seconds_count", queue="default", task="test.echo"),
    }
    ok = enqueue(task="test.echo")
    bad = enqueue(task="test.fail", max_attempts=2)

    with running_worker():
        wait_for_status(ok.job_id, "succeeded")
        wait_for_status(bad.job_id, "failed")

    assert sample("dl_jobs_claimed_total", queue="default") - before["claimed"] == 3
    assert sample("dl_jobs_succeeded_total", queue="default", task="test.echo") - before["succeeded"] == 1
    assert sample("dl_jobs_failed_total", queue="default", task="test.fail") - before["failed"] == 1
    assert sample("dl_jobs_retried_total", queue="default", task="test.fail") - before["retried"] == 1
    assert sample("dl_job_processing_seconds_count", queue="default", task="test.echo") - before["timed"] == 1


def test_reaped_jobs_are_counted():
    enqueued = enqueue(task="test.echo", max_attempts=1)
    services.jobs_claim(queue="default", limit=1, worker_id="gone")
    Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    before = sample("dl_jobs_reaped_total", outcome="lost")

    assert reap_expired_leases() == {"requeued": 0, "lost": 1}

    assert sample("dl_jobs_reaped_total", outcome="lost") - before == 1
