"""Django ``@task`` functions for the tasks-backend tests (trusted through JOBS_HANDLER_MODULES)."""

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
