"""Typos are heard at the door: a trigger of a task no worker runs, and an operator's change to a
queue nothing has named, are refused (400, 404) and write nothing."""

import pytest

from jobs.queue.models import Job, Queue
from tests.conftest import ALL_DATABASES
from tests.helpers import scoped_client
from tests.jobs.conftest import enqueue

pytestmark = ALL_DATABASES
TRIGGER = {"queue": "default", "lock_key": "k"}


@pytest.mark.parametrize(
    "path, body",
    [
        ("/api/v1/jobs/trigger", {**TRIGGER, "task": "jobs.nopp"}),
        (
            "/api/v1/jobs/trigger/bulk",
            {"jobs": [{**TRIGGER, "task": "jobs.noop"}, {**TRIGGER, "task": "jobs.nopp", "lock_key": "j"}]},
        ),
    ],
)
def test_a_task_no_worker_runs_is_a_400_naming_the_known_ones_and_nothing_is_written(api, path, body):
    answer = api.post(path, body, format="json")

    assert answer.status_code == 400
    refusal = answer.json()
    assert refusal["code"] == "unknown_task" and "jobs.nopp" in refusal["message"]
    assert refusal["details"]["task"] == ["Unknown task 'jobs.nopp'."]
    assert "jobs.noop" in refusal["details"]["known_tasks"]  # a handler of this deployment's
    assert "load.*" in refusal["details"]["known_tasks"]  # another service's, JOBS_EXTERNAL_TASKS
    assert not Job.objects.exists()


@pytest.mark.parametrize("task", ["jobs.noop", "load.rates", "other"])
def test_this_deployments_tasks_and_other_services_are_taken(api, task):
    assert api.post("/api/v1/jobs/trigger", {**TRIGGER, "task": task}, format="json").status_code == 201


@pytest.fixture
def operator():
    return scoped_client("read", "operate")


@pytest.mark.parametrize("change", ["pause", "resume", "limits"])
def test_a_change_to_a_queue_nothing_names_is_a_404_and_creates_nothing(operator, change):
    path = f"/api/v1/queues/ghost-queue/{change}"
    answer = operator.put(path, {}, format="json") if change == "limits" else operator.post(path)

    assert answer.status_code == 404
    assert answer.json()["code"] == "queue_not_found" and '{"create": true}' in answer.json()["message"]
    assert not Queue.objects.exists()


def test_asked_to_create_it_a_pause_or_limits_make_the_queue(operator):
    paused = operator.post("/api/v1/queues/new-queue/pause", {"create": True}, format="json")
    limited = operator.put("/api/v1/queues/other-queue/limits", {"max_running": 2, "create": True}, format="json")

    assert (paused.status_code, paused.json()["paused"]) == (200, True)
    assert limited.status_code == 200
    assert set(Queue.objects.values_list("name", flat=True)) == {"new-queue", "other-queue"}


@pytest.mark.parametrize("queue", ["by-a-job", "by-an-operator", "default", "sqlrs"])  # the last two: settings'
def test_a_queue_named_by_a_job_an_operator_or_a_setting_is_paused_as_it_is(operator, queue):
    enqueue(task="t", queue="by-a-job")
    assert operator.post("/api/v1/queues/by-an-operator/pause", {"create": True}, format="json").status_code == 200
    operator.post("/api/v1/queues/by-an-operator/resume")

    assert operator.post(f"/api/v1/queues/{queue}/pause").status_code == 200
    assert Queue.objects.get(name=queue).paused
