"""What the runtime runs, registered in one place: kinds of work, their settings, periodic tasks,
how a periodic task runs once per period, the checks a worker passes before it serves work bound
to one host, and the modules a worker loads at start.

The runtime imports no app: apps register here from their ``worker`` module (a module or a
package), which ``runworker`` and ``runreaper`` import at start (:func:`load`):

- ``@work_source("kind")`` on a class implementing ``jobs.runtime.loop.WorkSource`` with a
  ``build(names, setup)`` classmethod and a ``name_problem(name)`` one (why a name cannot be
  served, or None); WORKERS_JSON entries ``{"kind": NAME, "concurrency": N}`` and the flag
  ``--kind NAME[:N]`` are served by it (``jobs.queue.worker``: queues; ``jobs.processes.worker``:
  process namespaces). Its settings are a ``jobs.runtime.config.kind_settings`` dataclass.
- ``@periodic_tasks`` on a function of the worker's configuration that returns the app's
  :class:`~jobs.runtime.periodic.PeriodicWork` list; ``@periodic_ledger`` on the function that
  runs one of them once per period across every process (the job queue's ``dl_periodic_tasks``).
- ``@start_check`` on a function that refuses a worker whose host cannot serve what it was asked
  to serve; ``@on_start`` on a function every worker calls with its task handlers once its
  checks pass; ``@at_exit`` on a function a ``runworker`` process calls before it exits, once its
  runtime has stopped (the database-state engine stops the servers the process started);
  ``@modules_option("handlers")`` on a function loading the modules a worker's ``--handlers
  MODULE`` flag names (and the app's own).

Which process runs a periodic task: a housekeeping task (the default) runs in ``runreaper`` and in
every ``runworker`` not started with ``--no-reaper``, once per period across them all; a task
``local_to`` a source (``("queue", "sqlrs")``: the database-state engine's, on its host) runs in
the workers serving that source, with or without ``--no-reaper``, and never in ``runreaper``.
"""

import importlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.apps import apps
from django.conf import settings
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from jobs.runtime.config import WorkerConfig
    from jobs.runtime.periodic import PeriodicWork

log = logging.getLogger("jobs.runtime")

Served = Mapping[str, Mapping[str, int]]  # what a worker serves: kind -> {name: concurrency}


class StartRefused(Exception):
    """A worker may not serve what it was asked to here; the message says why and what to do."""


@dataclass(frozen=True)
class WorkerSetup:
    """What a work source is built with: the worker's configuration, the task handlers, and how
    the worker names itself (leases, events, logs)."""

    config: "WorkerConfig"
    handlers: Any  # jobs.queue.handlers.Registry
    worker_id: Any  # uuid.UUID
    name: str


_sources: dict[str, Any] = {}  # kind -> a WorkSource class with build(names, setup)
_periodic: list[Callable[["WorkerConfig"], Iterable["PeriodicWork"]]] = []
_start_checks: list[Callable[[Served], None]] = []
_start_hooks: list[Callable[[Any], None]] = []
_exit_hooks: list[Callable[..., Any]] = []  # hook(deadline=): a runworker process's last steps
_kind_settings: set[str] = set()  # the names a worker's overrides may give (jobs.runtime.config)
_ledger: list[Callable[..., Any]] = []  # at most one: runs a periodic task once per period
_module_options: dict[str, tuple[Callable[[list[str]], None], str]] = {}  # flag -> (loader, help)


def work_source(kind: str):
    """Register the decorated WorkSource class as the one serving WORKERS_JSON entries of ``kind``."""

    def decorator(cls):
        existing = _sources.get(kind)
        if existing is not None and existing is not cls:
            raise ValueError(f"work source kind {kind!r} is already registered to {existing!r}")
        _sources[kind] = cls
        return cls

    return decorator


def periodic_tasks(factory: Callable[["WorkerConfig"], Iterable["PeriodicWork"]]):
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
    ``hook(handlers)`` with its task handlers (``jobs.queue.handlers.Registry``)."""
    if hook not in _start_hooks:
        _start_hooks.append(hook)
    return hook


def at_exit(hook: Callable[..., Any]):
    """Register a function a ``runworker`` process calls before it exits, once its runtime has
    stopped (its runs ended or were released, its last writes made), in the stop's time:
    ``hook(deadline=)``, the ``time.monotonic()`` it returns by (the process exits then, whatever
    still runs). A runtime run in a thread of another process (a test's) calls none."""
    if hook not in _exit_hooks:
        _exit_hooks.append(hook)
    return hook


def register_kind_settings(names: set[str]) -> None:
    _kind_settings.update(names)


def periodic_ledger(run_once: Callable[..., Any]):
    """Register how a periodic task runs once per period across every process:
    ``run_once(name=, period_sec=, runner=, work=)`` returns ``.ran``, ``.result``, ``.due_in_sec``."""
    if _ledger and _ledger[0] is not run_once:
        raise ValueError(f"a periodic ledger is already registered: {_ledger[0]!r}")
    _ledger[:] = [run_once]
    return run_once


def modules_option(flag: str, *, help: str):
    """Register ``loader(extra_modules)`` behind runworker's ``--FLAG MODULE`` (repeatable): it
    loads the app's own modules of that kind, then the extra ones."""

    def decorator(loader: Callable[[list[str]], None]):
        _module_options[flag] = (loader, help)
        return loader

    return decorator


def load() -> None:
    """Every installed app's ``worker`` module (importing one twice is harmless)."""
    autodiscover_modules("worker")


def kind_setting_names() -> set[str]:
    load()
    return set(_kind_settings)


def ledger() -> Callable[..., Any]:
    load()
    if not _ledger:
        raise LookupError("no app registered a periodic ledger (@periodic_ledger)")
    return _ledger[0]


def module_options() -> dict[str, tuple[Callable[[list[str]], None], str]]:
    load()
    return dict(_module_options)


def load_app_modules(*, app_module: str, setting: str, extra: list[str] = ()) -> None:
    """Every installed app's ``app_module`` module, then the modules of setting ``setting`` and ``extra``."""
    autodiscover_modules(app_module)
    for module in [*getattr(settings, setting), *extra]:
        importlib.import_module(module)


def source_kinds() -> list[str]:
    load()
    return sorted(_sources)


def source_class(kind: str):
    load()
    if kind not in _sources:
        known = ", ".join(sorted(_sources))
        raise LookupError(f"no work source of kind {kind!r} is registered (known: {known})")
    return _sources[kind]


def served_in_order(serves: Served) -> dict[str, dict[str, int]]:
    """What a worker serves, its kinds in the order of their apps in INSTALLED_APPS (the queue's
    first), those with no name left out; ``LookupError`` for a kind nobody registered."""
    served = {kind: dict(names) for kind, names in serves.items() if names}
    app_order = [config.name for config in apps.get_app_configs()]

    def app_index(kind: str) -> int:
        app = apps.get_containing_app_config(source_class(kind).__module__)
        return app_order.index(app.name) if app else len(app_order)

    return {kind: served[kind] for kind in sorted(served, key=lambda kind: (app_index(kind), kind))}


def check_start(served: Served) -> None:
    load()
    for check in _start_checks:
        check(served)


def run_start_hooks(handlers) -> None:
    load()
    for hook in _start_hooks:
        hook(handlers)


def run_exit_hooks(*, deadline: float) -> None:
    """Each exit hook in turn, all with ``deadline``; one that raises is logged, and the next runs."""
    load()
    for hook in _exit_hooks:
        try:
            hook(deadline=deadline)
        except Exception:
            log.exception("an exit hook failed", extra={"hook": getattr(hook, "__qualname__", repr(hook))})


def periodic_for(config: "WorkerConfig", *, served: Served, housekeeping: bool) -> list["PeriodicWork"]:
    """The periodic tasks a process runs: the housekeeping ones if it does housekeeping (runreaper;
    runworker unless --no-reaper), and those local to a source it serves."""
    load()
    tasks = [task for factory in _periodic for task in factory(config)]
    return [
        task
        for task in tasks
        if (housekeeping if task.local_to is None else task.local_to[1] in served.get(task.local_to[0], {}))
    ]
