"""Django's tasks framework on dl_jobs: enqueue with @task, run under the worker, read results back."""

from datetime import timedelta

import pytest
from django.tasks import TaskResultStatus, default_task_backend
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils import timezone

from jobs import services
from jobs.models import Job
from jobs.tasks_backend import django_task_handler
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs import django_tasks
from tests.jobs.conftest import running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED


@pytest.fixture(autouse=True)
def trusted_task_module(settings):
    settings.JOBS_HANDLER_MODULES = ["tests.jobs.django_tasks"]


def test_enqueue_writes_a_ready_job():
    result = django_tasks.add.enqueue(2, 3)

    assert result.status == TaskResultStatus.READY
    job = Job.objects.get(job_id=result.id)
    assert (job.queue, job.task, job.args, job.priority) == (
        "default",
        "tests.jobs.django_tasks.add",
        {"args": [2, 3], "kwargs": {}},
        100,
    )
    assert job.max_attempts == 1 and job.producer == "django.tasks:default"


def test_the_default_lease_ttl_applies_to_django_tasks_too(settings):
    settings.DL_DEFAULT_LEASE_TTL_SEC = 42

    result = django_tasks.add.enqueue(1, 1)

    assert Job.objects.get(job_id=result.id).lease_ttl_sec == 42


def test_priority_queue_and_run_after_map_onto_the_job():
    later = timezone.now() + timedelta(hours=1)

    result = django_tasks.shout.using(run_after=later).enqueue("hi", times=2)

    job = Job.objects.get(job_id=result.id)
    assert (job.queue, job.priority, job.available_at) == ("reports", 50, later)
    assert job.args == {"args": ["hi"], "kwargs": {"times": 2}}


def test_end_to_end_under_the_worker():
    result = django_tasks.add.enqueue(2, 3)

    with running_worker():
        wait_for_status(result.id, "succeeded")

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == 5
    assert result.started_at and result.finished_at and result.last_attempted_at
    assert result.attempts == 1 and len(result.worker_ids) == 1
    fetched = django_tasks.add.get_result(result.id)
    assert (fetched.status, fetched.return_value, fetched.args) == (TaskResultStatus.SUCCESSFUL, 5, [2, 3])


def test_context_and_keyword_arguments():
    context = django_tasks.which_attempt.enqueue()
    shouted = django_tasks.shout.enqueue("go", times=3)

    with running_worker(queues={"default": 1, "reports": 1}):
        wait_for_status(context.id, "succeeded")
        wait_for_status(shouted.id, "succeeded")

    assert default_task_backend.get_result(context.id).return_value == {"attempt": 1, "id": context.id}
    assert default_task_backend.get_result(shouted.id).return_value == "GO!GO!GO!"


def test_failure_is_reported_with_its_exception():
    result = django_tasks.explode.enqueue()

    with running_worker():
        wait_for_status(result.id, "failed")

    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert result.errors[0].exception_class_path == "builtins.KeyError"
    assert result.errors[0].exception_class is KeyError
    assert "missing" in result.errors[0].traceback
    with pytest.raises(ValueError):
        result.return_value


def test_unknown_results():
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("not-a-uuid")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("01a20000-0000-7000-8000-000000000000")
    plain = services.job_enqueue(spec=services.JobSpec(queue="default", task="test.echo", lock_key="k"))
    with pytest.raises(TaskResultDoesNotExist):  # a job, but not a Django task
        default_task_backend.get_result(str(plain.job_id))


def test_only_trusted_modules_are_imported_by_name(settings):
    assert django_task_handler("tests.jobs.django_tasks.add") is not None
    settings.JOBS_HANDLER_MODULES = []
    assert django_task_handler("tests.jobs.django_tasks.add") is None  # not an installed app
    assert django_task_handler("os.system") is None
    assert django_task_handler("jobs.models.uuid7") is None  # trusted module, but not a @task
