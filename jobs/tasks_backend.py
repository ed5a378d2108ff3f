"""A Django ``TASKS`` backend on dl_jobs: ``@task`` functions enqueue here and run under runworker.

    TASKS = {"default": {"BACKEND": "jobs.tasks_backend.DatabaseBackend", "QUEUES": [],
                         "OPTIONS": {"MAX_ATTEMPTS": 1}}}

A task becomes a job whose ``task`` is the function's dotted path and whose ``args`` are
``{"args": [...], "kwargs": {...}}``; Django priorities (-100..100, higher first) map to
dl_jobs priorities (200..0, lower first); ``run_after`` is ``available_at``. The worker
finds the function through a registry resolver; its return value is kept in the job's
``done`` event and errors in its ``failed``/``requeue`` events, which is what
``get_result`` reads back.
"""

import traceback
import uuid
from functools import partial

from django.apps import apps
from django.conf import settings
from django.tasks import Task, TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json
from django.utils.module_loading import import_string

from jobs import services
from jobs.models import EventKind, Job, JobStatus, uuid7
from jobs.registry import JobContext, TaskHandler

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
    supports_defer = True
    supports_priority = True
    supports_get_result = True

    def enqueue(self, task, args, kwargs):
        self.validate_task(task)
        job_id = uuid7()
        payload = {"args": normalize_json(list(args)), "kwargs": normalize_json(dict(kwargs))}
        services.job_enqueue(
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
            )
        )
        result = TaskResult(
            task=task,
            id=str(job_id),
            status=TaskResultStatus.READY,
            enqueued_at=timezone.now(),
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
        job = Job.objects.filter(job_id=job_id).first()
        task = _django_task(job.task) if job else None
        if task is None:
            raise TaskResultDoesNotExist(result_id)
        return _task_result(task, job, self.alias)


def _task_result(task: Task, job: Job, alias: str) -> TaskResult:
    worker_ids, errors, last_attempted_at, return_value = [], [], None, None
    for event in job.events.order_by("event_id"):
        payload = event.payload or {}
        if event.kind == EventKind.PICKED:
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
        task=task,
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


def _trusted_module(module_path: str) -> bool:
    """Inside an installed app, or one of the JOBS_HANDLER_MODULES."""
    if apps.get_containing_app_config(module_path) is not None:
        return True
    return any(
        module_path == trusted or module_path.startswith(f"{trusted}.") for trusted in settings.JOBS_HANDLER_MODULES
    )


def _django_task(name: str) -> Task | None:
    """The ``@task`` object at a dotted path, if that is what it names.

    Only trusted modules are imported: a job's task name comes from API clients.
    """
    module_path = name.rpartition(".")[0]
    if not module_path or not _trusted_module(module_path):
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
    except Exception as exc:
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
