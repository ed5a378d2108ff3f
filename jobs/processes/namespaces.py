"""Process namespaces: each a processor callable and its options.

Apps declare them in a ``processors`` module (or a module listed in ``PROCESSES_HANDLER_MODULES``)::

    from jobs.processes.namespaces import namespace

    @namespace("orders", retry_policy=RetryPolicy(initial_timeout=5, max_attempts=3), process_step_timeout=60)
    def process_order(task_type, args, process):
        if task_type == "init":
            return {"events": [{"created": args}], "action": {"set_timer": 30}}
        ...

A processor gets the task type (``init``, ``call``, ``repair``, ``timeout``, ``notify``), the
task's args and the process (:class:`ProcessView`, its history in the task's range: see
``ranges``); one that declares a ``context`` parameter also gets the task's context
(progressor's third argument: what the init, call, repair or simple repair was given, carried
on to the timers the task sets). It returns a dict with any of:
``events`` (a list of payloads, or of ``{"payload": ..., "metadata": ...}``), ``response``
(omitted: ``"ok"``), ``aux_state``, ``metadata`` (not returned: kept), and ``action``:
``{"set_timer": <datetime, ISO 8601 text or seconds from now>, "remove": true?}``,
``"unset_timer"`` or ``"remove"``. ``{"error": reason}``, raising, or returning anything else
is an error result.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from jobs.processes.models import DEFAULT_STEP_TIMEOUT_SEC
from jobs.processes.ranges import history_range_problem
from jobs.runtime.registry import load_app_modules
from pipeline_project.api.errors import NotFoundError


@dataclass(frozen=True)
class RetryPolicy:
    """How a failed timeout task is retried: delays initial_timeout, × backoff_coefficient, ...
    while the delay is below max_timeout (if set), attempts remain and the reason is retryable."""

    initial_timeout: float = 5.0
    backoff_coefficient: float = 1.0
    max_timeout: float | None = None
    max_attempts: int = 3
    non_retryable_errors: tuple[str, ...] = ()

    def next_delay(self, *, attempts: int, last_delay: float, reason: str) -> float | None:
        """The delay before the next attempt after ``attempts`` failed ones, or None: give up."""
        if attempts >= self.max_attempts or reason in self.non_retryable_errors:
            return None
        delay = self.initial_timeout if attempts <= 1 or not last_delay else last_delay * self.backoff_coefficient
        if self.max_timeout is not None and delay >= self.max_timeout:
            return None
        return delay


@dataclass(frozen=True)
class ProcessView:
    """What a processor sees of its process. Its ``history`` (the events in ``range``) is read
    when the processor first asks for it: a processor that never does costs no history read,
    the largest part of a task's work with a long history. It is what it was at the claim: only
    the running task (this one) adds events to its process."""

    process_id: str
    namespace: str
    status: str
    detail: str | None
    aux_state: Any
    metadata: Any
    last_event_id: int
    range: dict = field(default_factory=dict)  # the range ``history`` is read in
    read_history: Callable[[], list[dict]] = field(default=list, repr=False, compare=False)

    @functools.cached_property
    def history(self) -> list[dict]:
        return self.read_history()


@dataclass(frozen=True)
class Namespace:
    name: str
    processor: Callable[[str, Any, ProcessView], Any]
    retry_policy: RetryPolicy = RetryPolicy()
    process_step_timeout: float = DEFAULT_STEP_TIMEOUT_SEC
    concurrency: int = 10
    history_range: dict | None = None  # the events a processor gets unless its task names a range (None: all)
    takes_context: bool = field(init=False)

    def __post_init__(self):
        if self.history_range is not None and (problem := history_range_problem(self.history_range)):
            raise ValueError(f"namespace {self.name!r}: {problem}")
        object.__setattr__(self, "takes_context", _takes_context(self.processor))

    def process(self, task_type: str, args: Any, view: ProcessView, context: Any) -> Any:
        """Run the processor on one task."""
        if self.takes_context:
            return self.processor(task_type, args, view, context=context)
        return self.processor(task_type, args, view)


def _takes_context(processor: Callable) -> bool:
    try:
        parameters = inspect.signature(processor).parameters.values()
    except (TypeError, ValueError):  # a callable without a signature: called the plain way
        return False
    return any(p.name == "context" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


_namespaces: dict[str, Namespace] = {}


def namespace(
    name: str,
    *,
    retry_policy: RetryPolicy = RetryPolicy(),
    process_step_timeout: float = DEFAULT_STEP_TIMEOUT_SEC,
    concurrency: int = 10,
    history_range: dict | None = None,
):
    """Register the decorated function as the processor of namespace ``name``."""

    def decorator(func):
        register(
            Namespace(
                name=name,
                processor=func,
                retry_policy=retry_policy,
                process_step_timeout=process_step_timeout,
                concurrency=concurrency,
                history_range=history_range,
            )
        )
        return func

    return decorator


def register(definition: Namespace) -> None:
    existing = _namespaces.get(definition.name)
    if existing is not None and existing.processor is not definition.processor:
        raise ValueError(f"namespace {definition.name!r} is already registered to {existing.processor!r}")
    _namespaces[definition.name] = definition


def get(name: str) -> Namespace | None:
    return _namespaces.get(name)


def require(name: str) -> Namespace:
    definition = _namespaces.get(name)
    if definition is None:
        raise NotFoundError("namespace not found", code="namespace_not_found")
    return definition


def names() -> list[str]:
    return sorted(_namespaces)


def load_processor_modules(extra: list[str] = ()) -> None:
    """The namespaces: every installed app's ``processors`` module, PROCESSES_HANDLER_MODULES, ``extra``."""
    load_app_modules(app_module="processors", setting="PROCESSES_HANDLER_MODULES", extra=extra)
