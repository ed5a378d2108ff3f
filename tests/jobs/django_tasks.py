"""Django ``@task`` functions for the tasks-backend tests (trusted through JOBS_HANDLER_MODULES,
which the tests set before they import this module: the backend refuses tasks of untrusted
modules as they are defined)."""

from django.tasks import task


@task
def add(a, b):
    return a + b


@task(queue_name="reports", priority=50)
def shout(word, *, times=1):
    return (word.upper() + "!") * times


@task(takes_context=True)
def which_attempt(context):
    return {"attempt": context.attempt, "id": context.task_result.id}


@task
def explode():
    raise KeyError("missing")


@task
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task
async def echo_async(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task
def failing_value_error():
    raise ValueError("This task failed due to ValueError")


@task
def failing_system_exit():
    raise SystemExit("This task failed due to SystemExit")


@task
def complex_return_value():
    return {"not": {"json"}}  # a set


def not_a_task():
    """A module-level function the tests wrap in a Task that is not bound under its name."""
