"""The processes' periodic task: zombie collection (``jobs.runtime.registry``)."""

import logging
import time

from django.conf import settings

from jobs.processes import metrics, selectors, services
from jobs.runtime.periodic import PeriodicWork
from jobs.runtime.registry import periodic_tasks

log = logging.getLogger("jobs.processes")


@periodic_tasks
def process_tasks(config) -> list[PeriodicWork]:
    """Zombie collection, housekeeping like the queue's: it reads the running tasks' deadlines,
    not their processors, so any process runs it (a reaper, a worker serving queues only), once
    per period across them all, and collects every namespace's zombies."""
    return [PeriodicWork("processes.zombies", settings.PROC_ZOMBIE_PERIOD_SEC, collect_zombies)]


def collect_zombies() -> dict:
    """In every namespace with a task running, the tasks ``PROC_ZOMBIE_MARGIN_SEC`` past their
    deadline (their claim plus their namespace's step timeout): their worker died."""
    collected = 0
    for name in selectors.running_namespaces():
        started = time.perf_counter()
        found = services.zombies_collect(namespace=name, margin_sec=settings.PROC_ZOMBIE_MARGIN_SEC)
        metrics.ZOMBIE_COLLECTION.labels(namespace=name).observe((time.perf_counter() - started) * 1000)
        if found:
            log.warning("zombie tasks collected", extra={"namespace": name, "collected": found})
        collected += found
    return {"collected": collected}
