"""The ``@task`` API: task handlers by name, the context a handler receives, and which modules hold them.

Apps declare handlers in a ``job_handlers`` module (imported when a worker starts)::

    from jobs.queue.handlers import task

    @task("reports.build", retry_backoff_sec=10)
    def build_report(ctx):
        for chunk in chunks(ctx.args["report_id"]):
            ctx.check_cancelled()          # stops here if the job was canceled
            process(chunk)
            ctx.progress({"done": chunk.number})
        return {"rows": total}             # stored in the job's `done` event

A task can be declared with a schedule beside it (``jobs.schedules``): a cron expression, an
interval (seconds or a ``timedelta``), or a :class:`TaskSchedule` for args and the rest::

    @task("reports.daily", schedule=TaskSchedule(cron="0 6 * * *", timezone="Europe/Prague", args={"kind": "daily"}))
    @task("cache.warm", schedule=timedelta(minutes=5))

Workers create or update these schedules (by name: the task's, unless given) when they start.

A handler that blocks (a subprocess, a socket) can wait on ``ctx.signals.stopped`` or use
``ctx.run_subprocess([...])``, which kills the child as soon as the job is canceled or its
lease is lost, then raises as ``check_cancelled()`` would.

A job's task name comes from its producer (an API client, say), so a worker imports a module
by name only if it is trusted: inside an installed app, or one of ``JOBS_HANDLER_MODULES``
(or below one). Django ``@task`` functions elsewhere are refused when they are defined and
enqueued (``jobs.queue.tasks_backend``): no worker would run them.
"""

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from fnmatch import fnmatchcase
from functools import cache
from typing import Any

from django.apps import apps
from django.conf import settings

from jobs.queue import services
from jobs.runtime.registry import load_app_modules
from jobs.runtime.signals import RunSignals
from jobs.runtime.subprocesses import run_subprocess
from pipeline_project.db.storable import json_problem


class JobCancelled(Exception):
    """Raised by ``ctx.check_cancelled()`` when the job's cancellation was requested."""


class LeaseLost(Exception):
    """The worker no longer holds the job (it was reaped, deleted or reset); stop working on it."""


class FatalError(Exception):
    """Raise it when another attempt cannot help (invalid args, say): the job fails at once."""


@dataclass(frozen=True)
class TaskHandler:
    name: str
    func: Callable[["JobContext"], Any]
    retry_backoff_sec: float | None = None  # None: DL_RETRY_BACKOFF_SEC × attempt


@dataclass(frozen=True)
class TaskSchedule:
    """A schedule declared in code; the fields left None take the schedules' defaults."""

    cron: str | None = None  # five fields, read in ``timezone``
    every: int | timedelta | None = None  # or an interval, whole seconds
    args: dict = field(default_factory=dict)
    timezone: str | None = None
    queue: str | None = None
    priority: int | None = None
    lock_key: str | None = None
    missed_policy: str | None = None  # skip, once, catch_up
    catch_up_max: int | None = None
    name: str | None = None  # default: the task's name

    @classmethod
    def of(cls, timing: str | int | timedelta) -> "TaskSchedule":
        """A cron expression or an interval, with the defaults for the rest."""
        return cls(cron=timing) if isinstance(timing, str) else cls(every=timing)

    def values(self, task: str) -> dict:
        """The schedule's fields for ``jobs.schedules.services``."""
        every = self.every.total_seconds() if isinstance(self.every, timedelta) else self.every
        optional = {
            "timezone": self.timezone,
            "queue": self.queue,
            "priority": self.priority,
            "lock_key": self.lock_key,
            "missed_policy": self.missed_policy,
            "catch_up_max": self.catch_up_max,
        }
        return {
            "name": self.name or task,
            "task": task,
            "args": self.args,
            "cron": self.cron,
            "interval_sec": int(every) if isinstance(every, float) and every.is_integer() else every,
            **{name: value for name, value in optional.items() if value is not None},
        }


class JobContext:
    """What a handler gets: the job's data and the cooperative-cancel/progress hooks.

    The control loop sets the run's signals (canceled, lease lost) from another thread.
    """

    __slots__ = (
        "_progress_interval",
        "_progress_written_at",
        "_unwritten_progress",
        "job",
        "signals",
        "worker_id",
    )

    def __init__(self, job: services.ClaimedJob, worker_id: str, *, progress_interval_sec: float = 0.0):
        self.job = job
        self.worker_id = worker_id
        self.signals = RunSignals(cancel_requested=job.cancel_requested)
        self._progress_interval = progress_interval_sec
        self._progress_written_at = time.monotonic()  # short runs write their progress with the outcome only
        self._unwritten_progress: dict | None = None

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.lease.job_id

    @property
    def args(self) -> dict:
        return self.job.args

    @property
    def attempt(self) -> int:
        return self.job.lease.attempt

    @property
    def cancel_requested(self) -> bool:
        return self.signals.canceled

    def check_cancelled(self) -> None:
        """Call between chunks of work: raises if the job was canceled or taken away."""
        if self.signals.lease_lost:
            raise LeaseLost(f"job {self.job_id} is no longer held by this worker")
        if self.signals.canceled:
            raise JobCancelled(f"job {self.job_id} was canceled")

    def run_subprocess(self, args, **kwargs):
        """``subprocess.run(args, **kwargs)`` killed as soon as the job is canceled or its lease lost
        (then raises JobCancelled or LeaseLost); ``timeout`` raises ``TimeoutExpired`` as usual."""
        self.check_cancelled()
        completed = run_subprocess(args, stop=self.signals.stopped, **kwargs)
        self.check_cancelled()
        return completed

    def progress(self, data: dict) -> None:
        """Store progress on the job (visible in its status); also picks up cancellation.

        Writes at most once per ``DL_PROGRESS_INTERVAL_SEC`` (the first time that long after
        the run started): a call in between keeps its data for the next write, and the last
        data is written with the run's outcome.
        """
        if not isinstance(data, dict):
            raise TypeError(f"progress must be a dict, not {type(data).__name__}")
        if problem := json_problem(data):
            raise ValueError(f"progress cannot be stored: it {problem}")
        now = time.monotonic()
        if now - self._progress_written_at < self._progress_interval:
            self._unwritten_progress = data
            return
        self._progress_written_at, self._unwritten_progress = now, None
        cancel_requested = services.job_progress(lease=self.job.lease, progress=data)
        if cancel_requested is None:
            self.mark_lease_lost()
        elif cancel_requested:
            self.mark_cancel_requested()

    def unwritten_progress(self) -> dict | None:
        """Progress reported since the last write (the worker records it with the outcome)."""
        return self._unwritten_progress

    def mark_cancel_requested(self) -> None:
        self.signals.request_cancel()

    def mark_lease_lost(self) -> None:
        self.signals.lose_lease()


class Registry:
    def __init__(self):
        self._handlers: dict[str, TaskHandler] = {}
        self._resolvers: list[Callable[[str], TaskHandler | None]] = []
        self._schedules: dict[str, TaskSchedule] = {}

    def register(self, name: str, func: Callable, *, retry_backoff_sec: float | None = None) -> None:
        existing = self._handlers.get(name)
        if existing is not None and existing.func is not func:
            raise ValueError(f"task {name!r} is already registered to {existing.func!r}")
        self._handlers[name] = TaskHandler(name=name, func=func, retry_backoff_sec=retry_backoff_sec)

    def task(
        self,
        name: str,
        *,
        retry_backoff_sec: float | None = None,
        schedule: str | int | timedelta | TaskSchedule | None = None,
    ):
        """Register the decorated handler as ``name``; ``schedule``: a cron expression, an interval, or a TaskSchedule."""

        def decorator(func):
            self.register(name, func, retry_backoff_sec=retry_backoff_sec)
            if schedule is not None:
                self._schedules[name] = schedule if isinstance(schedule, TaskSchedule) else TaskSchedule.of(schedule)
            return func

        return decorator

    def schedules(self) -> list[dict]:
        """The schedules declared beside tasks, as ``jobs.schedules.services.schedules_declare`` takes them."""
        return [schedule.values(task) for task, schedule in sorted(self._schedules.items())]

    def add_resolver(self, resolver: Callable[[str], TaskHandler | None]) -> None:
        """A fallback for names that were not registered (e.g. Django ``@task`` functions)."""
        self._resolvers.append(resolver)

    def get(self, name: str) -> TaskHandler | None:
        handler = self._handlers.get(name)
        if handler is None:
            for resolver in self._resolvers:
                if handler := resolver(name):
                    break
        return handler

    def names(self) -> list[str]:
        return sorted(self._handlers)


def load_handler_modules(extra: list[str] = ()) -> None:
    """The ``@task`` handlers: every installed app's ``job_handlers`` module, JOBS_HANDLER_MODULES, ``extra``."""
    load_app_modules(app_module="job_handlers", setting="JOBS_HANDLER_MODULES", extra=extra)


def task_runnable(name: str) -> bool:
    """Whether some worker runs ``name``: a handler of this deployment (its handler modules are
    loaded the first time it is asked), or a task of ``JOBS_EXTERNAL_TASKS``."""
    if any(fnmatchcase(name, pattern) for pattern in settings.JOBS_EXTERNAL_TASKS):
        return True
    _handler_modules_loaded()
    return registry.get(name) is not None


def tasks_known() -> list[str]:
    """The tasks ``task_runnable`` knows by name, and the patterns of ``JOBS_EXTERNAL_TASKS``."""
    _handler_modules_loaded()
    return sorted({*registry.names(), *settings.JOBS_EXTERNAL_TASKS})


@cache
def _handler_modules_loaded() -> None:
    load_handler_modules()


def trusted_module(module_path: str) -> bool:
    """Whether a worker may import ``module_path`` to find a task: inside an installed app, or
    one of JOBS_HANDLER_MODULES or below it."""
    if apps.get_containing_app_config(module_path) is not None:
        return True
    return any(
        module_path == trusted or module_path.startswith(f"{trusted}.") for trusted in settings.JOBS_HANDLER_MODULES
    )


registry = Registry()
task = registry.task
