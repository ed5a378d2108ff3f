"""Process namespaces as a work source of the runtime (``jobs.runtime``).

For each namespace served, a lane of ``concurrency`` threads: the control loop claims due
tasks into free slots (woken by NOTIFY on ``dl_proc_work`` when a task is scheduled, and by
its own timer for the next scheduled time, never by a fixed-interval scan); a handler thread
runs the processor and records the result, then tells the loop. Successes are recorded by
group commit: those that end while another is being written go in the next statement
together (one transaction, one commit for many: the commit of a NOTIFY holds a server-wide
lock).
"""

import functools
import logging
import time
from collections import deque
from dataclasses import dataclass

from django.db import IntegrityError
from django.utils import timezone

from jobs.processes import metrics, selectors, services
from jobs.processes import namespaces as namespace_registry
from jobs.processes.group_commit import GroupCommit
from jobs.processes.models import WORK_CHANNEL
from jobs.queue import services as queue_services
from jobs.runtime.database import DATABASE_ERRORS, error_extra, use_generic_plans
from jobs.runtime.lanes import Lane
from jobs.runtime.loop import Runtime
from jobs.runtime.registry import WorkerSetup, work_source
from pipeline_project.db.storable import exception_text

log = logging.getLogger("jobs.processes")


@dataclass(eq=False)
class TaskRun:
    namespace: namespace_registry.Namespace
    task: services.ClaimedTask


@work_source("namespace")
class NamespaceSource:
    """The namespaces this worker serves: ``{name: concurrency}``."""

    channels = (WORK_CHANNEL,)

    @classmethod
    def build(cls, namespaces: dict[str, int], setup: WorkerSetup) -> "NamespaceSource":
        return cls(namespaces, worker_name=setup.name)

    @staticmethod
    def name_problem(name: str) -> str | None:
        return queue_services.text_field_problem("queue", name)  # a namespace is named as a queue is

    def __init__(self, namespaces: dict[str, int], *, worker_name: str):
        self.worker_name = worker_name
        unknown = sorted(set(namespaces) - set(namespace_registry.names()))
        if unknown:
            raise LookupError(f"no processor is registered for namespace(s) {', '.join(unknown)}")
        self.definitions = {name: namespace_registry.require(name) for name in namespaces}
        self.lanes = {
            name: Lane(
                name,
                concurrency,
                execute=self._execute,
                crashed=self._crashed,
                report=self._report,
                thread_prefix=f"proc-{name}",
            )
            for name, concurrency in namespaces.items()
        }
        self.successes = {name: GroupCommit(functools.partial(_successes_write, name)) for name in namespaces}
        self.runtime: Runtime | None = None
        self._may_have_work = dict.fromkeys(namespaces, True)
        self._next_due: dict[str, float | None] = dict.fromkeys(namespaces)
        # Read the next due time from the database after the next short claim (we may not know it).
        self._reread_due = dict.fromkeys(namespaces, True)
        self._running: set[TaskRun] = set()
        self._finished: deque[TaskRun] = deque()

    # --- the runtime's interface ------------------------------------------------------

    def start(self, runtime: Runtime) -> None:
        self.runtime = runtime
        for lane in self.lanes.values():
            lane.start()
        log.info(
            "serving process namespaces",
            extra={"namespaces": {name: lane.concurrency for name, lane in self.lanes.items()}},
        )

    def stop(self) -> None:
        for lane in self.lanes.values():
            lane.stop()

    def recheck(self) -> None:
        self._may_have_work = dict.fromkeys(self.lanes, True)
        self._reread_due = dict.fromkeys(self.lanes, True)

    def notified(self, channel: str, payload: str) -> None:
        """``namespace@<epoch>``: a task of the namespace falls due then (now or later)."""
        name, _at, due = payload.partition("@")
        if name not in self._may_have_work:
            return
        try:
            in_sec = float(due) - time.time()
        except ValueError:
            self._may_have_work[name] = self._reread_due[name] = True
            return
        if in_sec <= 0:
            self._may_have_work[name] = True
        else:
            due_at = time.monotonic() + in_sec
            current = self._next_due[name]
            self._next_due[name] = due_at if current is None else min(current, due_at)

    def collect(self) -> None:
        while self._finished:
            run = self._finished.popleft()
            self._running.discard(run)
            self.lanes[run.namespace.name].release()

    def pending(self) -> bool:
        return bool(self._finished)

    def deadline(self, now: float, stopping: bool) -> float | None:
        if stopping:
            return None
        deadlines = [
            now if self._may_have_work[name] else self._next_due[name]
            for name, lane in self.lanes.items()
            if lane.free > 0
        ]
        deadlines = [due for due in deadlines if due is not None]
        return min(deadlines, default=None)

    def step(self, now: float, stopping: bool) -> None:
        if stopping:
            return
        for name, lane in self.lanes.items():
            due = self._next_due[name]
            if due is not None and due <= now:  # a timer: after this look, find the next one
                self._next_due[name] = None
                self._may_have_work[name] = self._reread_due[name] = True
            limit = lane.free
            if not self._may_have_work[name] or limit <= 0:
                continue
            started = time.perf_counter()
            try:
                tasks = services.tasks_claim(namespace=name, limit=limit, worker=self.worker_name)
            except IntegrityError as exc:
                if services.is_running_race(exc):
                    continue  # another worker started a task of the same process: claim again
                raise
            metrics.CALLS_SCANNING.labels(namespace=name).observe((time.perf_counter() - started) * 1000)
            for task in tasks:
                run = TaskRun(self.definitions[name], task)
                self._running.add(run)
                lane.submit(run)
            if len(tasks) < limit:  # took all that is due: sleep until the next one is
                self._may_have_work[name] = False
                if self._reread_due[name]:
                    self._reread_due[name] = False
                    started = time.perf_counter()
                    self._schedule_next_due(name)
                    metrics.TIMERS_SCANNING.labels(namespace=name).observe((time.perf_counter() - started) * 1000)

    def in_flight(self) -> int:
        return len(self._running)

    def finish(self, release: bool) -> None:
        """Tasks still running after the shutdown timeout stay in dl_proc_running: the zombie
        collector puts their processes in error, as for a killed worker."""

    # --- handler threads ----------------------------------------------------------------

    def _execute(self, run: TaskRun) -> None:
        task, definition = run.task, run.namespace
        if task.task_type == "remove":
            started = time.perf_counter()
            services.task_remove_process(task=task, namespace=definition.name)
            metrics.PROCESS_REMOVING.labels(namespace=definition.name).observe((time.perf_counter() - started) * 1000)
            return
        started = time.perf_counter()
        try:
            outcome = services.result_parse(definition.process(task.task_type, task.args, task.view, task.context))
        except Exception as exc:  # noqa: BLE001 - a process's failure is its task's outcome, recorded
            outcome = exception_text(exc)  # the process's detail and the caller's reason: masked, storable
        metrics.TASK_PROCESSING.labels(namespace=definition.name, task_type=task.task_type).observe(
            (time.perf_counter() - started) * 1000
        )
        started = time.perf_counter()
        completion = self._complete(task, definition.name, outcome)
        metrics.TASK_COMPLETION.labels(namespace=definition.name, completion_type=completion).observe(
            (time.perf_counter() - started) * 1000
        )

    def _complete(self, task: services.ClaimedTask, namespace: str, outcome: services.Result | str) -> str:
        if isinstance(outcome, services.Result) and outcome.action != "remove":
            try:
                self.successes[namespace].add((task, outcome))
                return services.completion_type(outcome)
            except DATABASE_ERRORS:
                pass  # the whole group was refused: this task is written alone, and fails alone
        use_generic_plans()  # as for successes
        return services.task_complete(task=task, namespace=namespace, outcome=outcome)

    def _crashed(self, run: TaskRun, exc: BaseException) -> None:
        """The processor raised BaseException or recording failed: record it as the task's error."""
        log.error("a task ended without a result", extra={**error_extra(exc), "task_id": run.task.task_id})
        try:
            services.task_complete(task=run.task, namespace=run.namespace.name, outcome=exception_text(exc))
        except DATABASE_ERRORS as db_exc:  # the zombie collector will see to it
            log.error("could not record a task's error", extra=error_extra(db_exc, task_id=run.task.task_id))

    def _report(self, run: TaskRun, _outcome) -> None:
        self._finished.append(run)
        self.runtime.wake()

    # --- timers ------------------------------------------------------------------------

    def _schedule_next_due(self, name: str) -> None:
        soonest = selectors.next_scheduled_time(namespace=name)
        if soonest is not None:
            due_at = time.monotonic() + max(0.0, (soonest - timezone.now()).total_seconds())
            current = self._next_due[name]
            self._next_due[name] = due_at if current is None else min(current, due_at)


def _successes_write(namespace: str, succeeded: list) -> None:
    # Generic plans for the completion statements (planning them is most of their cost); commits
    # stay synchronous: a completion lost in a crash would leave a zombie, not a re-run.
    use_generic_plans()
    services.tasks_succeed(namespace=namespace, succeeded=succeeded)
