"""Handlers run to their outcome (``jobs.queue.handlers.run_handler``) in a worker, whatever they do:
unknown tasks, hostile exceptions, results PostgreSQL cannot store; failures stored masked."""

import pytest

from jobs.queue.handlers import registry
from jobs.queue.models import JobEvent
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.conftest import enqueue, running_worker, wait_for_status

pytestmark = ALL_DATABASES_COMMITTED


def test_errors_and_tracebacks_are_stored_with_secrets_masked():
    enqueued = enqueue(task="test.leaky", max_attempts=1)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    payload = JobEvent.objects.get(job_id=enqueued.job_id, kind="failed").payload
    assert failed.error == "ConnectionError: cannot reach postgres://app:***@db/prod with api_key=***"
    assert "hunter2" not in payload["traceback"] and "abc123" not in payload["traceback"]
    assert "Traceback" in payload["traceback"]


@registry.task("test.quotes_its_password")
def quotes_its_password(ctx):
    raise RuntimeError(f"the server refused {ctx.args['user']}/{ctx.args['db']['password']} twice")


def test_a_secret_arg_the_error_quotes_as_it_is_is_masked_in_the_error_and_the_traceback():
    args = {"user": "ada", "db": {"password": "plain-hunter2"}, "note": "abc"}
    enqueued = enqueue(task="test.quotes_its_password", args=args, max_attempts=1)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    payload = JobEvent.objects.get(job_id=enqueued.job_id, kind="failed").payload
    assert failed.error == "RuntimeError: the server refused ada/•••••• twice"
    assert "plain-hunter2" not in payload["traceback"] and "ada/•••••• twice" in payload["traceback"]


def test_an_unknown_task_fails_at_once_with_a_clear_error():
    enqueued = enqueue(task="nobody.handles.this")

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert failed.attempt == 1
    assert failed.error == "Unknown task 'nobody.handles.this': no handler is registered for it in this worker."
    assert "test.echo" in JobEvent.objects.get(job_id=enqueued.job_id, kind="failed").payload["known_tasks"]


def test_a_result_that_cannot_be_stored_is_an_error():
    enqueued = enqueue(task="test.unserializable", max_attempts=1)

    with running_worker():
        failed = wait_for_status(enqueued.job_id, "failed")

    assert "TypeError" in failed.error


@pytest.mark.parametrize(
    ("task", "error"),
    [
        ("test.nan", "TypeError: The handler's result cannot be stored: it contains nan, which JSON cannot represent."),
        ("test.nul_error", "ValueError: bad byte \ufffd here, and a lone ? surrogate"),
        ("test.system_exit", "SystemExit: 3"),
        ("test.keyboard_interrupt", "KeyboardInterrupt: "),
        ("test.unprintable", "_Unprintable: <_Unprintable whose message cannot be read>"),
    ],
)
def test_every_run_ends_with_an_outcome_and_frees_its_slot(task, error):
    hostile = enqueue(task=task, max_attempts=2)
    after = enqueue(task="test.echo")

    with running_worker(queues={"default": 1}):  # one slot: a lost slot would strand `after`
        failed = wait_for_status(hostile.job_id, "failed")
        wait_for_status(after.job_id, "succeeded")

    assert failed.error == error and failed.attempt == 2
    event = JobEvent.objects.get(job_id=hostile.job_id, kind="failed")
    assert event.payload["exception_class"].endswith(error.split(":")[0])


@pytest.fixture
def broken_resolver():
    """A task lookup that raises (an import error in a module it loads)."""

    def resolve(name):
        if name == "broken.lookup":
            raise ImportError("the module of broken.lookup is broken")

    registry.add_resolver(resolve)
    yield
    registry._resolvers.remove(resolve)


def test_a_task_lookup_that_raises_is_the_runs_error(broken_resolver):
    enqueued = enqueue(task="broken.lookup", max_attempts=1)

    with running_worker(queues={"default": 1}):
        failed = wait_for_status(enqueued.job_id, "failed")

    assert failed.error == "ImportError: the module of broken.lookup is broken"
