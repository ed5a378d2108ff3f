"""Django's tasks framework on dl_jobs: enqueue with @task, run under the worker, read results back.

Besides the backend's own behaviour, the expectations Django's test suite (tests/tasks) has of
every backend, translated to this one: what ``enqueue`` returns is what ``get_result`` reads
back, ``refresh()`` of an untouched result changes nothing, the tasks a backend cannot run are
refused by ``validate_task``, results carry their errors, signals are sent.
"""

import asyncio
import dataclasses
import importlib
import logging
import pickle
import uuid
from datetime import datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.db import connections
from django.tasks import TaskResultStatus, default_task_backend, task
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist, TaskResultMismatch
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import Job
from jobs.queue.tasks_backend import django_task_handler, enqueue_after
from pipeline_project.api.errors import InvalidInputError
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED

TASKS_MODULE = "tests.jobs.django_tasks"


@pytest.fixture(autouse=True)
def django_tasks(settings):
    """The test tasks' module, trusted before it is imported (its tasks are validated as defined)."""
    settings.JOBS_HANDLER_MODULES = [TASKS_MODULE]
    return importlib.import_module(TASKS_MODULE)


def run_async(coroutine):
    """Run ``coroutine``; then close the connections its database calls opened in asgiref's thread."""

    async def and_close():
        try:
            return await coroutine
        finally:
            await sync_to_async(connections.close_all)()

    return asyncio.run(and_close())


def test_enqueue_writes_a_ready_job(django_tasks):
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


def test_the_enqueued_result_is_ready_and_unfinished(django_tasks):
    result = django_tasks.echo.enqueue(1, two=3)

    assert (result.task, result.args, result.kwargs) == (django_tasks.echo, [1], {"two": 3})
    assert result.status == TaskResultStatus.READY and not result.is_finished
    assert result.started_at is None and result.finished_at is None and result.last_attempted_at is None
    assert result.attempts == 0 and result.errors == []
    with pytest.raises(ValueError, match="Task has not finished yet"):
        result.return_value  # noqa: B018


def test_the_default_lease_ttl_applies_to_django_tasks_too(django_tasks, settings):
    settings.DL_DEFAULT_LEASE_TTL_SEC = 42

    result = django_tasks.add.enqueue(1, 1)

    assert Job.objects.get(job_id=result.id).lease_ttl_sec == 42


def test_priority_queue_and_run_after_map_onto_the_job(django_tasks):
    later = timezone.now() + timedelta(hours=1)

    result = django_tasks.shout.using(run_after=later).enqueue("hi", times=2)

    job = Job.objects.get(job_id=result.id)
    assert (job.queue, job.priority, job.available_at) == ("reports", 50, later)
    assert job.args == {"args": ["hi"], "kwargs": {"times": 2}}


@pytest.mark.parametrize(
    "variant",
    [
        lambda tasks: tasks.echo,
        lambda tasks: tasks.shout,
        lambda tasks: tasks.echo.using(priority=-100, queue_name="elsewhere"),
        lambda tasks: tasks.echo.using(priority=100, run_after=timezone.now() + timedelta(hours=1)),
        lambda tasks: tasks.echo.using(run_after=timezone.now() - timedelta(days=1)),
    ],
    ids=["plain", "decorated-priority-and-queue", "using-priority-and-queue", "deferred", "run-after-past"],
)
def test_get_result_right_after_enqueue_is_the_enqueued_result(django_tasks, variant):
    # Django's test_get_result: the backend reads back exactly what it handed out.
    enqueued_task = variant(django_tasks)

    result = enqueued_task.enqueue(1, (2, 3), key={"nested": [4]}, **{"7": None})

    assert default_task_backend.get_result(result.id) == result
    assert enqueued_task.get_result(result.id) == result
    assert result.enqueued_at == Job.objects.get(job_id=result.id).created_at


def test_what_enqueue_returns_holds_the_args_as_the_task_will_receive_them(django_tasks):
    result = django_tasks.echo.enqueue((1, 2), {3: "int key"})

    assert result.args == [[1, 2], {"3": "int key"}]  # JSON, as stored
    assert default_task_backend.get_result(result.id) == result


def test_refresh_of_an_untouched_result_changes_nothing(django_tasks):
    # Django's test_refresh_result: the first refresh() must not move enqueued_at or anything else.
    result = django_tasks.echo.using(priority=7).enqueue("x")
    enqueued = dataclasses.asdict(result)

    result.refresh()
    assert dataclasses.asdict(result) == enqueued

    run_async(result.arefresh())
    assert dataclasses.asdict(result) == enqueued


def test_async_enqueue_and_get_result(django_tasks):
    async def scenario():
        result = await django_tasks.echo.aenqueue(5)
        return result, await default_task_backend.aget_result(result.id), await django_tasks.echo.aget_result(result.id)

    result, fetched, through_task = run_async(scenario())

    assert result.status == TaskResultStatus.READY and result.args == [5]
    assert fetched == result and through_task == result


def test_a_result_pickles(django_tasks):
    result = django_tasks.echo.enqueue(1, a=2)

    assert pickle.loads(pickle.dumps(result)) == result


def test_a_result_of_another_task_is_a_mismatch(django_tasks):
    result = django_tasks.echo.enqueue()

    with pytest.raises(TaskResultMismatch):
        django_tasks.add.get_result(result.id)
    with pytest.raises(TaskResultMismatch):
        run_async(django_tasks.add.aget_result(result.id))


def test_unknown_results():
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("not-a-uuid")
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("123")
    with pytest.raises(TaskResultDoesNotExist):
        run_async(default_task_backend.aget_result("123"))
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result("01a20000-0000-7000-8000-000000000000")
    plain = services.job_enqueue(spec=services.JobSpec(queue="default", task="test.echo", lock_key="k"))
    with pytest.raises(TaskResultDoesNotExist):  # a job, but not a Django task
        default_task_backend.get_result(str(plain.job_id))


def test_arguments_that_are_not_json_are_refused_and_nothing_is_written(django_tasks):
    before = Job.objects.count()

    with pytest.raises(TypeError, match="Unsupported type"):
        django_tasks.echo.enqueue(datetime.now())
    with pytest.raises(TypeError, match="Unsupported type"):
        run_async(django_tasks.echo.aenqueue(key={1, 2}))

    assert Job.objects.count() == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"priority": 101}, "priority must be a whole number"),
        ({"priority": -101}, "priority must be a whole number"),
        ({"priority": 3.1}, "priority must be a whole number"),
        ({"run_after": datetime(2030, 1, 1)}, "run_after must be an aware datetime"),
        ({"queue_name": "no spaces please"}, "The queue name"),
        ({"queue_name": "q" * 201}, "The queue name"),
    ],
)
def test_validate_task_refuses_what_the_queue_would_refuse(django_tasks, change, message):
    with pytest.raises(InvalidTask, match=message):
        django_tasks.echo.using(**change)


def test_validate_task_keeps_django_own_rules(django_tasks):
    def nested():
        pass

    with pytest.raises(InvalidTask, match="module level"):
        task()(nested)
    with pytest.raises(InvalidTask, match="first argument of 'context'"):
        task(takes_context=True)(django_tasks.add.func)


def test_a_task_from_a_module_the_worker_does_not_import_is_refused(django_tasks, settings):
    before = Job.objects.count()

    # Defined in this (importable, but untrusted) test module: refused as it is defined ...
    with pytest.raises(InvalidTask, match="JOBS_HANDLER_MODULES"):
        task()(_untrusted_function)

    # ... and at enqueue, when its module stops being trusted.
    settings.JOBS_HANDLER_MODULES = []
    with pytest.raises(InvalidTask, match="JOBS_HANDLER_MODULES"):
        django_tasks.add.enqueue(1, 2)
    with pytest.raises(InvalidTask, match="JOBS_HANDLER_MODULES"):
        run_async(django_tasks.add.aenqueue(1, 2))

    assert Job.objects.count() == before


def test_a_task_not_found_under_its_own_name_is_refused_at_enqueue(django_tasks):
    unbound = task()(django_tasks.not_a_task)  # tests.jobs.django_tasks.not_a_task is the function, not the task

    with pytest.raises(InvalidTask, match="does not name this task"):
        unbound.enqueue()


def _untrusted_function():
    pass


def test_only_trusted_modules_are_imported_by_name(settings):
    assert django_task_handler("tests.jobs.django_tasks.add") is not None
    settings.JOBS_HANDLER_MODULES = []
    assert django_task_handler("tests.jobs.django_tasks.add") is None  # not an installed app
    assert django_task_handler("os.system") is None
    assert django_task_handler("jobs.queue.models.uuid7") is None  # trusted module, but not a @task


def test_end_to_end_under_the_worker(django_tasks):
    result = django_tasks.add.enqueue(2, 3)

    with running_worker():
        wait_for_status(result.id, "succeeded")

    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == 5
    assert result.enqueued_at <= result.started_at <= result.finished_at
    assert result.last_attempted_at >= result.started_at
    assert result.attempts == 1 and len(result.worker_ids) == 1
    fetched = django_tasks.add.get_result(result.id)
    assert (fetched.status, fetched.return_value, fetched.args) == (TaskResultStatus.SUCCESSFUL, 5, [2, 3])
    assert fetched == result


def test_context_keyword_and_async_tasks(django_tasks):
    context = django_tasks.which_attempt.enqueue()
    shouted = django_tasks.shout.enqueue("go", times=3)
    awaited = django_tasks.echo_async.enqueue(1, two=2)

    with running_worker(queues={"default": 2, "reports": 1}):
        for result in (context, shouted, awaited):
            wait_for_status(result.id, "succeeded")

    assert default_task_backend.get_result(context.id).return_value == {"attempt": 1, "id": context.id}
    assert default_task_backend.get_result(shouted.id).return_value == "GO!GO!GO!"
    assert default_task_backend.get_result(awaited.id).return_value == {"args": [1], "kwargs": {"two": 2}}


def test_failures_are_reported_with_their_exception(django_tasks):
    # Django's test_catches_exception and test_complex_return_value.
    results = {
        KeyError: django_tasks.explode.enqueue(),
        ValueError: django_tasks.failing_value_error.enqueue(),
        SystemExit: django_tasks.failing_system_exit.enqueue(),
        TypeError: django_tasks.complex_return_value.enqueue(),
    }

    with running_worker():
        for result in results.values():
            wait_for_status(result.id, "failed")

    for exception, result in results.items():
        result.refresh()
        assert result.status == TaskResultStatus.FAILED and result.is_finished
        assert result.errors[0].exception_class is exception
        assert result.enqueued_at <= result.started_at <= result.finished_at
        with pytest.raises(ValueError, match="Task failed"):
            result.return_value  # noqa: B018
    assert "missing" in results[KeyError].errors[0].traceback
    assert results[ValueError].errors[0].traceback.endswith("ValueError: This task failed due to ValueError\n")
    assert results[SystemExit].errors[0].traceback.endswith("SystemExit: This task failed due to SystemExit\n")
    assert "Unsupported type" in results[TypeError].errors[0].traceback


def test_signals_are_sent_and_logged(django_tasks, caplog):
    received = []

    def record(signal_name):
        def receiver(sender, task_result, **kwargs):
            received.append((signal_name, task_result.id, task_result.status))

        return receiver

    receivers = {signal: record(name) for signal, name in [(task_enqueued, "enqueued"), (task_started, "started")]}
    receivers[task_finished] = record("finished")
    for signal, receiver in receivers.items():
        signal.connect(receiver)
    try:
        with caplog.at_level(logging.DEBUG, logger="django.tasks"):
            succeeded = django_tasks.add.enqueue(1, 1)
            failed = django_tasks.failing_value_error.enqueue()
            with running_worker():
                wait_for_status(succeeded.id, "succeeded")
                wait_for_status(failed.id, "failed")
    finally:
        for signal, receiver in receivers.items():
            signal.disconnect(receiver)

    assert ("enqueued", succeeded.id, TaskResultStatus.READY) in received
    assert ("started", succeeded.id, TaskResultStatus.RUNNING) in received
    assert ("finished", succeeded.id, TaskResultStatus.SUCCESSFUL) in received
    assert ("finished", failed.id, TaskResultStatus.FAILED) in received
    logged = [record.getMessage() for record in caplog.records if record.name == "django.tasks"]
    assert any(succeeded.id in line and "enqueued" in line for line in logged)
    assert any(failed.id in line and "state=FAILED" in line for line in logged)


# --- enqueue_after: tasks that wait for others --------------------------------------------


def test_a_task_runs_after_the_tasks_it_waits_for(django_tasks):
    first = django_tasks.add.enqueue(1, 2)
    second = django_tasks.add.enqueue(3, 4)
    after = enqueue_after(django_tasks.echo, [first, second.id], "then", done=True)
    assert after.status == TaskResultStatus.READY
    assert Job.objects.get(job_id=after.id).is_waiting

    with running_worker():
        wait_for_status(after.id, "succeeded")
    after.refresh()
    assert after.status == TaskResultStatus.SUCCESSFUL
    assert after.return_value == {"args": ["then"], "kwargs": {"done": True}}


def test_a_task_after_a_failed_one_fails_unless_run_anyway(django_tasks):
    failing = django_tasks.explode.enqueue()
    skipped = enqueue_after(django_tasks.add, [failing], 1, 1)
    anyway = enqueue_after(django_tasks.add, [failing], 2, 2, run_anyway=True)

    with running_worker():
        wait_for_status(anyway.id, "succeeded")
    skipped.refresh()
    assert skipped.status == TaskResultStatus.FAILED
    assert Job.objects.get(job_id=skipped.id).error == f"Upstream job {failing.id} failed."
    assert enqueue_after(django_tasks.add, [failing], 3, 3).status == TaskResultStatus.FAILED  # at once


def test_bad_upstream_results_are_refused(django_tasks):
    with pytest.raises(InvalidTask):
        enqueue_after(django_tasks.add, ["not-an-id"], 1, 1)
    with pytest.raises(InvalidInputError):
        enqueue_after(django_tasks.add, [uuid.uuid4()], 1, 1)
