"""What /metrics exposes: this process's (or, in multiprocess mode, this host's) metrics,
plus collectors that read current state from the database at scrape time."""

import os

from django.conf import settings
from django.utils.module_loading import import_string
from prometheus_client import REGISTRY, CollectorRegistry, multiprocess


class _ScrapeRegistry:
    def __init__(self, *sources):
        self.sources = sources

    def collect(self):
        for source in self.sources:
            yield from source.collect()


def metrics_registry():
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Counters of every process on the host (web workers and runworker) summed up.
        process_metrics = CollectorRegistry()
        multiprocess.MultiProcessCollector(process_metrics)
    else:
        process_metrics = REGISTRY
    database_collectors = [import_string(path)() for path in getattr(settings, "METRICS_COLLECTORS", [])]
    return _ScrapeRegistry(process_metrics, *database_collectors)
