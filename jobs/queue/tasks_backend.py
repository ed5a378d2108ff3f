"""A Django ``TASKS`` backend on dl_jobs: ``@task`` functions enqueue here and run under runworker.

    TASKS = {"default": {"BACKEND": "jobs.queue.tasks_backend.DatabaseBackend", "QUEUES": [],
                         "OPTIONS": {"MAX_ATTEMPTS": 1}}}

A task becomes a job whose ``task`` is the function's dotted path and whose ``args`` are
``{"args": [...], "kwargs": {...}}``; Django priorities (-100..100, higher first) map to
dl_jobs priorities (200..0, lower first); ``run_after`` is ``available_at``. The worker
finds the function through a registry resolver; its return value is kept in the job's
``done`` event and errors in its ``failed``/``requeue`` events, which is what
``get_result`` reads back.

The result ``enqueue`` returns is what ``get_result`` reads back until a worker touches the
job: ``enqueued_at`` is the stored ``created_at``, args are as the task will receive them.
Only tasks the worker can find are accepted: defined in a trusted module
(``jobs.queue.handlers.trusted_module``), under the name they are enqueued by.

``enqueue_after(task, [result, ...], *args, **kwargs)`` enqueues a task that waits for others
(job dependencies: see ``jobs.queue.dependency_rules``).
"""

import json
import traceback
import uuid
from collections.abc import Iterable
from datetime import datetime
from functools import partial

from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TASK_MAX_PRIORITY, TASK_MIN_PRIORITY, TaskError
from django.tasks.exceptions import InvalidTask, TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from jobs.queue import services
from jobs.queue.handlers import JobContext, TaskHandler, trusted_module
from jobs.queue.models import EventKind, Job, JobStatus, uuid7
from jobs.queue.services.producers import text_field_problem
from pipeline_project.db.snapshot import snapshot

PRIORITY_OFFSET = 100  # dl priority = 100 - django priority

_STATUS = {
    JobStatus.QUEUED: TaskResultStatus.READY,
    JobStatus.RUNNING: TaskResultStatus.RUNNING,
    JobStatus.SUCCEEDED: TaskResultStatus.SUCCESSFUL,
    JobStatus.FAILED: TaskResultStatus.FAILED,
    JobStatus.CANCELED: TaskResultStatus.FAILED,
    JobStatus.LOST: TaskResultStatus.FAILED,
}


class DatabaseBackend(BaseTaskBackend):
    supports_async_task = True  # the worker runs a coroutine function to its end (Task.call)
    supports_defer = True
    supports_priority = True
    supports_get_result = True

    def validate_task(self, task):
        """Django's rules, and what the worker needs to run the task: a module it trusts (see
        ``jobs.queue.handlers``), a queue name and a task name the queue accepts."""
        super().validate_task(task)
        module = task.func.__module__
        if not trusted_module(module):
            raise InvalidTask(
                f"Task module {module!r} is not one the worker imports: define the task in an installed "
                "app, or name its module in JOBS_HANDLER_MODULES."
            )
        for field, value in (("queue", task.queue_name), ("task", task.module_path)):
            if problem := text_field_problem(field, value):
                raise InvalidTask(f"The {field} name {value!r} cannot be a job's: {problem}")

    def enqueue(self, task, args, kwargs):
        return self.enqueue_after(task, (), args, kwargs)

    def enqueue_after(self, task, depends_on, args, kwargs, *, run_anyway: bool = False):
        """``enqueue``, the job waiting for the jobs ``depends_on`` names (see ``enqueue_after``)."""
        self.validate_task(task)
        found = _django_task(task.module_path)
        if found is None or found.func is not task.func:  # at definition its name is not bound yet
            raise InvalidTask(f"{task.module_path!r} does not name this task: the worker could not find it.")
        # As the task will receive them: JSON, through PostgreSQL.
        payload = json.loads(json.dumps({"args": normalize_json(args), "kwargs": normalize_json(kwargs)}))
        job_id = uuid7()
        enqueued = services.job_enqueue(
            spec=services.JobSpec(
                job_id=job_id,
                queue=task.queue_name,
                task=task.module_path,
                args=payload,
                lock_key=str(job_id),  # no mutual exclusion between Django tasks
                priority=PRIORITY_OFFSET - task.priority,
                available_at=task.run_after,
                max_attempts=self.options.get("MAX_ATTEMPTS", 1),
                producer=f"django.tasks:{self.alias}",
                depends_on=depends_on,
                run_anyway=run_anyway,
            )
        )
        result = TaskResult(
            task=task,
            id=str(job_id),
            status=_STATUS[enqueued.status],  # canceled already if a task it waits for failed
            enqueued_at=Job.objects.values_list("created_at", flat=True).get(job_id=job_id),
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=payload["args"],
            kwargs=payload["kwargs"],
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id):
        try:
            job_id = uuid.UUID(str(result_id))
        except ValueError:
            raise TaskResultDoesNotExist(result_id) from None
        with snapshot():
            job = Job.objects.filter(job_id=job_id).first()
            task = _django_task(job.task) if job else None
            if task is None:
                raise TaskResultDoesNotExist(result_id)
            return _task_result(task, job, list(job.events.order_by("event_id")), self.alias)


def enqueue_after(task: Task, upstream: Iterable, *args, run_anyway: bool = False, **kwargs) -> TaskResult:
    """Enqueue ``task(*args, **kwargs)`` to run once the tasks of ``upstream`` (their
    ``TaskResult``s, or result ids) all succeeded; if one fails, it is not run (its result
    fails), unless ``run_anyway``: then it runs once they all finished.

    Django's ``Task`` has no notion of dependencies, hence a function of this backend's.
    A task keyword argument named ``run_anyway`` cannot be passed through it.
    """
    backend = task.get_backend()
    if not isinstance(backend, DatabaseBackend):
        raise InvalidTask(f"enqueue_after needs a task of a DatabaseBackend, not of {type(backend).__name__}.")
    try:
        depends_on = [uuid.UUID(str(getattr(result, "id", result))) for result in upstream]
    except ValueError as exc:
        raise InvalidTask(f"Not a task result id: {exc}") from None
    return backend.enqueue_after(task, depends_on, args, kwargs, run_anyway=run_anyway)


def _task_result(task: Task, job: Job, events: list, alias: str) -> TaskResult:
    worker_ids, errors, last_attempted_at, return_value, run_after = [], [], None, None, None
    for event in events:
        payload = event.payload or {}
        if event.kind == EventKind.QUEUED and payload.get("available_at"):
            run_after = datetime.fromisoformat(payload["available_at"])
        elif event.kind == EventKind.PICKED:
            worker_ids.append(payload.get("worker", ""))
            last_attempted_at = event.ts
        elif "exception_class" in payload:
            errors.append(
                TaskError(exception_class_path=payload["exception_class"], traceback=payload.get("traceback", ""))
            )
        elif event.kind in (EventKind.FAILED, EventKind.LOST, EventKind.CANCELED) and job.error:
            errors.append(TaskError(exception_class_path="builtins.RuntimeError", traceback=job.error))
        elif event.kind == EventKind.DONE:
            return_value = payload.get("result")
    result = TaskResult(
        task=_as_enqueued(task, job, run_after=None if run_after == job.created_at else run_after, alias=alias),
        id=str(job.job_id),
        status=_STATUS[job.status],
        enqueued_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        last_attempted_at=last_attempted_at,
        args=job.args.get("args", []),
        kwargs=job.args.get("kwargs", {}),
        backend=alias,
        errors=errors,
        worker_ids=worker_ids,
    )
    object.__setattr__(result, "_return_value", return_value)
    return result


def _as_enqueued(task: Task, job: Job, *, run_after: datetime | None, alias: str) -> Task:
    """The task as it was enqueued (``task.using(...)``): its priority, queue, run_after, backend.

    ``run_after`` is the queued event's ``available_at``, unless that was the insert's own time:
    the job's ``available_at`` moves with retries.
    """
    priority = min(TASK_MAX_PRIORITY, max(TASK_MIN_PRIORITY, PRIORITY_OFFSET - job.priority))
    try:
        return task.using(priority=priority, queue_name=job.queue, run_after=run_after, backend=alias)
    except InvalidTask:  # a job a producer other than this backend wrote, on a queue the backend refuses
        return task


def _django_task(name: str) -> Task | None:
    """The ``@task`` object at a dotted path, if that is what it names.

    Only trusted modules are imported: a job's task name comes from API clients.
    """
    module_path = name.rpartition(".")[0]
    if not module_path or not trusted_module(module_path):
        return None
    try:
        candidate = import_string(name)
    except ImportError:
        return None
    if isinstance(candidate, Task) and isinstance(candidate.get_backend(), DatabaseBackend):
        return candidate
    return None


def django_task_handler(name: str) -> TaskHandler | None:
    """Registry resolver: run Django ``@task`` functions by their dotted path."""
    task = _django_task(name)
    return TaskHandler(name=name, func=partial(_run_django_task, task)) if task else None


def _run_django_task(task: Task, context: JobContext):
    args, kwargs = context.args.get("args", []), context.args.get("kwargs", {})
    now = timezone.now()
    result = TaskResult(
        task=task,
        id=str(context.job_id),
        status=TaskResultStatus.RUNNING,
        enqueued_at=None,
        started_at=now,
        finished_at=None,
        last_attempted_at=now,
        args=args,
        kwargs=kwargs,
        backend=task.backend,
        errors=[],
        worker_ids=[context.worker_id],
    )
    task_started.send(DatabaseBackend, task_result=result)
    try:
        if task.takes_context:
            value = task.call(TaskContext(task_result=result), *args, **kwargs)
        else:
            value = task.call(*args, **kwargs)
        value = normalize_json(value)
    except BaseException as exc:  # SystemExit too: the worker records every way a run ends
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", timezone.now())
        result.errors.append(
            TaskError(
                exception_class_path=f"{type(exc).__module__}.{type(exc).__qualname__}",
                traceback="".join(traceback.format_exception(exc)),
            )
        )
        task_finished.send(DatabaseBackend, task_result=result)
        raise
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", timezone.now())
    task_finished.send(DatabaseBackend, task_result=result)
    return value
