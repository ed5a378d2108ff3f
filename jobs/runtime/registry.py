"""What the runtime runs, registered in one place: work sources by kind, periodic tasks, and the
checks a worker passes before it serves work bound to one host.

Apps declare them in two modules, which ``runworker`` and ``runreaper`` import at start
(:func:`load`), as workers import ``job_handlers`` and ``processors``:

- ``<app>/source.py``: a class implementing ``jobs.runtime.loop.WorkSource`` with a ``build(names,
  setup)`` classmethod, registered with ``@work_source("kind")``; WORKERS_JSON entries
  ``{"kind": NAME, "concurrency": N}`` are served by it (``jobs.source``: queues,
  ``jobs.processes.source``: process namespaces).
- ``<app>/periodic.py``: ``@periodic_tasks`` on a function of the worker's configuration that
  returns the app's :class:`~jobs.runtime.periodic.PeriodicTask` list; ``@start_check`` on a
  function that refuses a worker whose host cannot serve what it was asked to serve; ``@on_start``
  on a function every worker calls with its task handlers once its checks pass.

Which process runs a periodic task: a housekeeping task (the default) runs in ``runreaper`` and in
every ``runworker`` not started with ``--no-reaper``, once per period across them all; a task
``local_to`` a source (``("queue", "sqlrs")``: the database-state engine's, on its host) runs in
the workers serving that source, with or without ``--no-reaper``, and never in ``runreaper``.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from jobs.runtime.config import WorkerConfig
    from jobs.runtime.periodic import PeriodicTask

Served = Mapping[str, Mapping[str, int]]  # what a worker serves: kind -> {name: concurrency}


class StartRefused(Exception):
    """A worker may not serve what it was asked to here; the message says why and what to do."""


@dataclass(frozen=True)
class WorkerSetup:
    """What a work source is built with: the worker's configuration, the task handlers, and how
    the worker names itself (leases, events, logs)."""

    config: "WorkerConfig"
    handlers: Any  # jobs.registry.Registry
    worker_id: Any  # uuid.UUID
    name: str


_sources: dict[str, Any] = {}  # kind -> a WorkSource class with build(names, setup)
_periodic: list[Callable[["WorkerConfig"], Iterable["PeriodicTask"]]] = []
_start_checks: list[Callable[[Served], None]] = []
_start_hooks: list[Callable[[Any], None]] = []


def work_source(kind: str):
    """Register the decorated WorkSource class as the one serving WORKERS_JSON entries of ``kind``."""

    def decorator(cls):
        existing = _sources.get(kind)
        if existing is not None and existing is not cls:
            raise ValueError(f"work source kind {kind!r} is already registered to {existing!r}")
        _sources[kind] = cls
        return cls

    return decorator


def periodic_tasks(factory: Callable[["WorkerConfig"], Iterable["PeriodicTask"]]):
    """Register an app's periodic tasks: ``factory(config)`` is called when a worker or reaper is
    built (so its periods follow the configuration of that moment)."""
    if factory not in _periodic:
        _periodic.append(factory)
    return factory


def start_check(check: Callable[[Served], None]):
    """Register a check every worker passes before it starts: ``check(served)`` raises
    :class:`StartRefused` when this host cannot serve what it was asked to serve."""
    if check not in _start_checks:
        _start_checks.append(check)
    return check


def on_start(hook: Callable[[Any], None]):
    """Register a function every worker calls when it starts, after the start checks pass:
    ``hook(handlers)`` with its task handlers (``jobs.registry.Registry``)."""
    if hook not in _start_hooks:
        _start_hooks.append(hook)
    return hook


def load() -> None:
    """Every installed app's ``source`` and ``periodic`` modules (importing one twice is harmless)."""
    autodiscover_modules("source", "periodic")


def source_kinds() -> list[str]:
    load()
    return sorted(_sources)


def source_class(kind: str):
    load()
    if kind not in _sources:
        known = ", ".join(sorted(_sources))
        raise LookupError(f"no work source of kind {kind!r} is registered (known: {known})")
    return _sources[kind]


def check_start(served: Served) -> None:
    load()
    for check in _start_checks:
        check(served)


def run_start_hooks(handlers) -> None:
    load()
    for hook in _start_hooks:
        hook(handlers)


def periodic_for(config: "WorkerConfig", *, served: Served, housekeeping: bool) -> list["PeriodicTask"]:
    """The periodic tasks a process runs: the housekeeping ones if it does housekeeping (runreaper;
    runworker unless --no-reaper), and those local to a source it serves."""
    load()
    tasks = [task for factory in _periodic for task in factory(config)]
    return [
        task
        for task in tasks
        if (housekeeping if task.local_to is None else task.local_to[1] in served.get(task.local_to[0], {}))
    ]
