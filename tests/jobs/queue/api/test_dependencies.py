"""The trigger API with depends_on, and the job's upstream and downstream jobs in its output."""

import threading
import uuid

import pytest
from django.db import connections

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.jobs.queue.api.test_views import BASE, VALID, trigger

pytestmark = ALL_DATABASES


def test_a_trigger_with_depends_on_waits_and_the_outputs_show_both_ends(api):
    upstream = trigger(api, VALID).json()["job_id"]
    response = trigger(api, {**VALID, "lock_key": "other", "depends_on": [upstream], "run_anyway": True})
    assert response.status_code == 201, response.content
    waiting = response.json()["job_id"]

    body = api.get(f"{BASE}/{waiting}").json()
    assert (body["status"], body["waiting"]) == ("queued", True)
    assert body["depends_on"] == [{"job_id": upstream, "task": "load.rates", "status": "queued", "run_anyway": True}]
    assert body["needed_by"] == []
    status = api.get(f"{BASE}/{upstream}/status").json()
    assert status["waiting"] is False
    assert status["needed_by"] == [{"job_id": waiting, "task": "load.rates", "status": "waiting", "run_anyway": True}]
    listed = {item["job_id"]: item["waiting"] for item in api.get(BASE).json()["results"]}
    assert listed == {upstream: False, waiting: True}


@ALL_DATABASES_COMMITTED
def test_a_jobs_answer_shows_it_and_the_jobs_it_waits_for_as_of_one_moment(api):
    upstream = trigger(api, VALID).json()["job_id"]
    waiting = trigger(api, {**VALID, "lock_key": "other", "depends_on": [upstream]}).json()["job_id"]
    stop = threading.Event()

    def cancel_and_retry_the_upstream_job():  # each statement changes both jobs (the trigger)
        while not stop.is_set():
            services.job_cancel(job_id=uuid.UUID(upstream))
            services.job_retry(job_id=uuid.UUID(upstream))
        connections.close_all()

    writer = threading.Thread(target=cancel_and_retry_the_upstream_job)
    writer.start()
    try:
        for _ in range(300):
            body = api.get(f"{BASE}/{waiting}").json()
            assert (body["status"] == "canceled") == (body["depends_on"][0]["status"] == "canceled"), body
    finally:
        stop.set()
        writer.join()


@pytest.mark.parametrize(
    ("case", "depends_on"),
    [
        ("unknown id", lambda: [str(uuid.uuid4())]),
        ("not a uuid", lambda: ["nope"]),
        ("not a list", lambda: "x"),
        ("too many", lambda: [str(uuid.uuid4()) for _ in range(101)]),
    ],
)
def test_bad_depends_on_is_a_400_naming_it_and_writes_nothing(api, case, depends_on):
    response = trigger(api, {**VALID, "depends_on": depends_on()})
    assert response.status_code == 400, response.content
    assert "depends_on" in str(response.json()["details"])
    assert Job.objects.count() == 0 and JobEvent.objects.count() == 0
