"""The pipeline's periodic task: ending runs whose jobs have all finished (``jobs.runtime.registry``)."""

from django.conf import settings

from ingestion import services
from jobs.runtime.periodic import PeriodicWork
from jobs.runtime.registry import periodic_tasks


@periodic_tasks
def ingestion_tasks(config) -> list[PeriodicWork]:
    return [PeriodicWork("ingestion.settle", settings.INGESTION_SETTLE_PERIOD_SEC, services.runs_settle)]
