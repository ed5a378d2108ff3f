"""Periodic tasks: work that runs once per period across every process, off the control loop.

Apps register them in their ``worker`` module (``jobs.runtime.registry``); runworker and
runreaper run theirs in a :class:`PeriodicRunner` on a thread of its own, never on the control
loop, whose latency is the work's. The registered periodic ledger (the job queue's
``services.periodic_task_run``) makes each task run once per period across all processes, one
process at a time.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_project.db.connections import is_transient_error, release_connections
from pipeline_project.db.outages import OUTAGES
from pipeline_project.db.storable import first_line

log = logging.getLogger("jobs.runtime.periodic")

RETRY_AFTER_ERROR_SEC = 5.0


@dataclass(frozen=True)
class PeriodicWork:
    name: str
    period_sec: float
    work: Callable[[], dict]  # returns what it did: recorded on the task's row, logged when not all zero
    # None: housekeeping, run by runreaper and every runworker that does housekeeping; (kind, name):
    # work local to the host of that source, run only by the workers serving it (``jobs.runtime.registry``).
    local_to: tuple[str, str] | None = None


class PeriodicRunner:
    """Runs the tasks that are due, as often as their periods say."""

    def __init__(self, tasks: list[PeriodicWork], *, runner_name: str, run_once: Callable[..., Any]):
        self.tasks = tasks
        self.run_once = run_once  # the registered periodic ledger's (``jobs.runtime.registry``)
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

    def run_until(self, stop: threading.Event, *, alive_file: Path | None = None) -> None:
        """Run due tasks until ``stop``; after each pass touch ``alive_file`` (a health check reads it)."""
        while not stop.is_set():
            wait = self.run_due(stop)
            if alive_file is not None:
                alive_file.touch()
            stop.wait(wait)

    def _run(self, task: PeriodicWork) -> float:
        """Run one task if no other process does; return the seconds until it is due again."""
        try:
            run = self.run_once(name=task.name, period_sec=task.period_sec, runner=self.runner_name, work=task.work)
        except Exception as exc:  # noqa: BLE001 - an outage or a bug: logged, the next try may succeed; the thread must live
            if is_transient_error(exc):
                OUTAGES.failed(exc, during=f"periodic task {task.name}")
            else:
                log.warning("periodic task failed", extra={"task": task.name, "error": first_line(exc)})
            return min(task.period_sec, RETRY_AFTER_ERROR_SEC)
        finally:
            release_connections()  # back to the pool until a task is due again
        if run.ran and any(run.result.values()):
            log.info("periodic task did work", extra={"task": task.name, **run.result})
        return run.due_in_sec
