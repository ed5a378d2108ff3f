"""The client's jobs calls against the service as deployed (gunicorn's ASGI server, and a
runworker where a job has to run)."""

import uuid

import httpx
import pytest
from pipeline_client import AuthError, InvalidRequestError, JobSpec, NotFoundError

from jobs.queue.models import Job
from tests.clients.helpers import LoseFirstAnswer, client, token, worker
from tests.conftest import ALL_DATABASES_COMMITTED

pytestmark = [ALL_DATABASES_COMMITTED, pytest.mark.slow]


def test_a_job_triggered_is_followed_to_its_end_through_the_streams_the_service_closes(service_url):
    queue = "clients.follow"
    jobs = client(service_url, token()).jobs
    with worker(queue):
        enqueued = jobs.trigger(queue, "test.sleep", lock_key="follow", args={"seconds": 2.5})
        assert enqueued.created and enqueued.idempotency_key
        assert jobs.status(enqueued.job_id).status in {"queued", "running"}

        events = list(jobs.follow(enqueued.job_id))  # streams end every second: resumed from the last event

    kinds = [event.kind for event in events]
    assert kinds[0] == "queued" and "picked" in kinds and kinds[-1] == "done", kinds
    ids = [event.event_id for event in events]
    assert ids == sorted(set(ids))  # nothing twice, nothing out of order across the resumed streams
    job = jobs.status(enqueued.job_id)
    assert job.status == "succeeded" and job.finished and job.finished_at >= job.started_at
    assert [event.event_id for event in jobs.events(enqueued.job_id, after=ids[0])] == ids[1:]


def test_a_daemon_token_of_the_default_scopes_cancels_a_job(service_url):
    jobs = client(service_url, token()).jobs
    enqueued = jobs.trigger("clients.cancel", "test.echo", lock_key="cancel")

    assert jobs.cancel(enqueued.job_id).status == "canceled"
    assert jobs.status(enqueued.job_id).status == "canceled"


def test_retry_by_filter_and_pausing_a_queue_take_an_operate_token(service_url):
    queue = "clients.operate"
    daemon = client(service_url, token()).jobs
    operator = client(service_url, token("read", "operate")).jobs
    enqueued = daemon.trigger(queue, "test.echo", lock_key="operate")
    daemon.cancel(enqueued.job_id)

    counted = operator.retry_matching(queue=queue, status="canceled", dry_run=True)
    assert (counted.matched, counted.dry_run) == (1, True)
    assert daemon.status(enqueued.job_id).status == "canceled"
    assert operator.retry_matching(queue=queue, status=["canceled"]).changed == 1
    assert daemon.status(enqueued.job_id).status == "queued"
    with pytest.raises(AuthError) as refused:
        daemon.retry_matching(queue=queue)
    assert (refused.value.status, refused.value.code) == (403, "permission_denied")

    assert operator.pause(queue).changed and not operator.pause(queue).changed
    assert next(state for state in operator.queues() if state.name == queue).paused
    with pytest.raises(AuthError):
        daemon.resume(queue)
    resumed = operator.resume(queue)
    assert (resumed.paused, resumed.changed) == (False, True)


def test_the_services_errors_are_raised_as_exceptions_of_the_one_shape(service_url):
    jobs = client(service_url, token()).jobs

    with pytest.raises(NotFoundError) as missing:
        jobs.status(str(uuid.uuid4()))
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(InvalidRequestError) as invalid:
        jobs.trigger("not a queue name!", "test.echo", lock_key="k")
    assert invalid.value.code == "validation_error" and "queue" in invalid.value.details
    with pytest.raises(AuthError) as unknown:
        client(service_url, "pcp_not-a-token").jobs.status(str(uuid.uuid4()))
    assert unknown.value.status == 401


def test_a_trigger_retried_after_its_answer_was_lost_enqueues_one_job(service_url):
    lossy = LoseFirstAnswer(httpx.HTTPTransport())
    jobs = client(service_url, token(), transport=lossy).jobs

    enqueued = jobs.trigger("clients.lossy", "test.echo", lock_key="lossy")

    assert len(lossy.requests) == 2 and lossy.requests[0].content == lossy.requests[1].content  # one key, sent twice
    assert not enqueued.created  # the retry found the job the first attempt enqueued
    assert list(Job.objects.filter(queue="clients.lossy").values_list("job_id", "idempotency_key")) == [
        (uuid.UUID(enqueued.job_id), enqueued.idempotency_key)
    ]


def test_a_bulk_trigger_retried_after_its_answer_was_lost_enqueues_each_job_once(service_url):
    lossy = LoseFirstAnswer(httpx.HTTPTransport())
    jobs = client(service_url, token(), transport=lossy).jobs
    specs = [JobSpec(queue="clients.bulk", task="test.echo", lock_key=f"bulk-{n}", args={"n": n}) for n in range(3)]

    enqueued = jobs.trigger_many(specs)

    assert len(lossy.requests) == 2 and len({item.job_id for item in enqueued}) == 3
    assert Job.objects.filter(queue="clients.bulk").count() == 3
    assert sorted(job.args["n"] for job in jobs.list(queue="clients.bulk")) == [0, 1, 2]


def test_a_list_reads_every_page_newest_first(service_url):
    jobs = client(service_url, token()).jobs
    ids = [jobs.trigger("clients.pages", "test.echo", lock_key=f"page-{n}").job_id for n in range(5)]

    listed = list(jobs.list(queue="clients.pages", status="queued", limit=2))

    assert [job.job_id for job in listed] == ids[::-1]
