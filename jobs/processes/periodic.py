"""The processes' periodic task: zombie collection (run by ``jobs.runtime.periodic``)."""

import logging
import time

from django.conf import settings

from jobs.processes import metrics, registry, services
from jobs.runtime.periodic import PeriodicTask

log = logging.getLogger("jobs.processes")


def process_tasks(namespaces) -> list[PeriodicTask]:
    """Zombie collection for ``namespaces``: a running task older than its namespace's step
    timeout plus ``PROC_ZOMBIE_MARGIN_SEC`` was left by a worker that died."""
    if not namespaces:
        return []
    return [PeriodicTask("processes.zombies", settings.PROC_ZOMBIE_PERIOD_SEC, lambda: collect_zombies(namespaces))]


def collect_zombies(namespaces) -> dict:
    collected = 0
    for name in namespaces:
        started = time.perf_counter()
        found = services.zombies_collect(
            namespace=name,
            older_than_sec=registry.require(name).process_step_timeout + settings.PROC_ZOMBIE_MARGIN_SEC,
        )
        metrics.ZOMBIE_COLLECTION.labels(namespace=name).observe((time.perf_counter() - started) * 1000)
        if found:
            log.warning("zombie tasks collected", extra={"namespace": name, "collected": found})
        collected += found
    return {"collected": collected}
