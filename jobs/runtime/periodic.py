"""Periodic tasks: work that runs once per period across every process, off the control loop.

Apps register them in their ``periodic`` module (``jobs.runtime.registry``); runworker and
runreaper run theirs in a :class:`PeriodicRunner` on a thread of its own, never on the control
loop, whose latency is the work's.
``services.periodic_task_run`` makes each task run once per period across all processes, one
process at a time (a transaction-scoped advisory lock on its name).
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs import services
from pipeline_project.databases import release_connections

log = logging.getLogger("jobs.runtime.periodic")

RETRY_AFTER_ERROR_SEC = 5.0


@dataclass(frozen=True)
class PeriodicTask:
    name: str
    period_sec: float
    work: Callable[[], dict]  # returns what it did: recorded on the task's row, logged when not all zero
    # None: housekeeping, run by runreaper and every runworker that does housekeeping; (kind, name):
    # work local to the host of that source, run only by the workers serving it (``jobs.runtime.registry``).
    local_to: tuple[str, str] | None = None


class PeriodicRunner:
    """Runs the tasks that are due, as often as their periods say."""

    def __init__(self, tasks: list[PeriodicTask], *, runner_name: str):
        self.tasks = tasks
        self.runner_name = runner_name
        self._due_at = {task.name: 0.0 for task in tasks}

    def run_due(self, stop: threading.Event) -> float:
        """Run every task that is due (none more once ``stop`` is set); return the seconds until
        one is due again."""
        for task in self.tasks:
            if stop.is_set():
                break
            if time.monotonic() >= self._due_at[task.name]:
                self._due_at[task.name] = time.monotonic() + self._run(task)
        return max(0.0, min(self._due_at.values(), default=time.monotonic() + 60) - time.monotonic())

    def run_until(self, stop: threading.Event) -> None:
        while not stop.is_set():
            stop.wait(self.run_due(stop))

    def _run(self, task: PeriodicTask) -> float:
        """Run one task if no other process does; return the seconds until it is due again."""
        try:
            run = services.periodic_task_run(
                name=task.name, period_sec=task.period_sec, runner=self.runner_name, work=task.work
            )
        except Exception as exc:  # noqa: BLE001 - an outage or a bug: logged, the next try may succeed; the thread must live
            log.warning("periodic task failed", extra={"task": task.name, "error": services.first_line(exc)})
            return min(task.period_sec, RETRY_AFTER_ERROR_SEC)
        finally:
            release_connections()  # back to the pool until a task is due again
        if run.ran and any(run.result.values()):
            log.info("periodic task did work", extra={"task": task.name, **run.result})
        return run.due_in_sec
