"""The processes' periodic task: zombie collection (run by ``jobs.runtime.periodic``)."""

import logging
import time

from django.conf import settings

from jobs.processes import metrics, selectors, services
from jobs.runtime.periodic import PeriodicTask

log = logging.getLogger("jobs.processes")


def process_tasks(namespaces) -> list[PeriodicTask]:
    """Zombie collection, on every worker that serves process namespaces. It runs once per
    period across them all, so whichever worker runs it collects every namespace's zombies."""
    if not namespaces:
        return []
    return [PeriodicTask("processes.zombies", settings.PROC_ZOMBIE_PERIOD_SEC, collect_zombies)]


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
