"""Each run that does not succeed is logged once by its worker (``jobs.queue.worker.runs``): a failed
attempt, a cancel, a lost lease, as JSON lines with the job's fields and no secret of its args."""

import json
import logging
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from jobs.queue import services
from jobs.queue.handlers import task
from jobs.queue.models import Job
from pipeline_project.logging import JsonFormatter, RequestIdFilter, SecretMaskingFilter
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import wait_for
from tests.jobs.conftest import enqueue, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED

LOGGER = "jobs.queue.worker.runs"
SECRET = "hunter2-in-args"


@task("test.runs.login", retry_backoff_sec=0.05)
def refused_login(ctx):
    raise PermissionError(f"login refused: password={ctx.args['password']}")


@pytest.fixture
def run_log(caplog):
    """The records of the runs' log, so far."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    return lambda: [record for record in caplog.records if record.name == LOGGER]


def as_logged(record: logging.LogRecord) -> dict:
    """The record as the service's stdout handler writes it: its filters, then its JSON formatter."""
    for log_filter in (RequestIdFilter(), SecretMaskingFilter()):
        log_filter.filter(record)
    return json.loads(JsonFormatter().format(record))


def assert_job_fields(line: dict, enqueued, **expected) -> None:
    """The line names the job (``expected``: its task, attempt, max_attempts and the outcome)."""
    expected = {"logger": LOGGER, "job_id": str(enqueued.job_id), "queue": "default", **expected}
    assert {key: line.get(key) for key in expected} == expected


def test_each_failed_attempt_is_logged_once_a_warning_while_attempts_remain_then_an_error(run_log):
    enqueued = enqueue(task="test.runs.login", args={"user": "ada", "password": SECRET}, max_attempts=2)

    with running_worker():
        wait_for_status(enqueued.job_id, "failed")
        wait_for(lambda: len(run_log()) == 2, what="both attempts logged")

    assert [record.levelno for record in run_log()] == [logging.WARNING, logging.ERROR]
    retried, failed = (as_logged(record) for record in run_log())
    assert_job_fields(retried, enqueued, task="test.runs.login", attempt=1, max_attempts=2, outcome="retry")
    assert_job_fields(failed, enqueued, task="test.runs.login", attempt=2, max_attempts=2, outcome="failed")
    assert (retried["level"], retried["message"], retried["retry_in_sec"]) == (
        "WARNING",
        "job attempt failed; it will be retried",
        0.05,
    )
    assert (failed["level"], failed["message"]) == ("ERROR", "job failed") and "retry_in_sec" not in failed
    for line in (retried, failed):
        assert line["error"] == "PermissionError: login refused: password=***"
        assert line["error_type"] == "builtins.PermissionError"
        assert line["traceback"].startswith("Traceback (most recent call last)")
        assert "in refused_login" in line["traceback"]
        assert SECRET not in json.dumps(line) and "args" not in line  # the job's args are never logged


def test_an_unknown_task_is_logged_as_an_error_at_its_first_attempt(run_log):
    enqueued = enqueue(task="nobody.handles.this", max_attempts=3)

    with running_worker():
        wait_for_status(enqueued.job_id, "failed")
        wait_for(run_log, what="the failure logged")

    [record] = run_log()
    line = as_logged(record)
    assert record.levelno == logging.ERROR and line["message"] == "job failed"
    assert_job_fields(line, enqueued, task="nobody.handles.this", attempt=1, max_attempts=3, outcome="failed")
    assert line["error"] == "Unknown task 'nobody.handles.this': no handler is registered for it in this worker."
    assert (line["error_type"], line["traceback"]) == (None, None)  # no exception was raised


def test_a_run_that_succeeds_is_not_logged(run_log):
    enqueued = enqueue(task="test.echo", args={"password": SECRET})

    with running_worker():
        wait_for_status(enqueued.job_id, "succeeded")

    assert run_log() == []


def test_a_lease_the_reaper_took_back_is_logged_once_as_a_warning(run_log):
    enqueued = enqueue(task="test.sleep", args={"seconds": 5, "token": SECRET}, max_attempts=1)

    with running_worker() as worker:
        wait_for_status(enqueued.job_id, "running")
        with transaction.atomic():  # expired and reaped before the worker's next renewal can land
            Job.objects.filter(job_id=enqueued.job_id).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
            services.jobs_reap()
        wait_for(run_log, what="the lost lease logged")
        [source] = worker.sources
        wait_for(lambda: not source.in_flight(), what="the run to end")  # its end is not logged again

    assert wait_for_status(enqueued.job_id, "lost").attempt == 1
    [record] = run_log()
    line = as_logged(record)
    assert record.levelno == logging.WARNING and line["message"] == "job lease lost; the run's outcome is not recorded"
    assert_job_fields(line, enqueued, task="test.sleep", attempt=1, max_attempts=1, outcome="lease_lost")
    assert SECRET not in json.dumps(line)


def test_a_job_canceled_while_running_is_logged_once_as_info(run_log):
    enqueued = enqueue(task="test.sleep", args={"seconds": 5}, max_attempts=4)

    with running_worker():
        wait_for_status(enqueued.job_id, "running")
        services.job_cancel(job_id=enqueued.job_id, requested_by="test")
        wait_for_status(enqueued.job_id, "canceled")

    [record] = run_log()
    line = as_logged(record)
    assert record.levelno == logging.INFO and line["message"] == "job canceled while running"
    assert_job_fields(line, enqueued, task="test.sleep", attempt=1, max_attempts=4, outcome="canceled")
    assert line["by"] == "handler"
