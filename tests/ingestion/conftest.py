import pytest

import ingestion.job_handlers  # noqa: F401  (registers the tasks, as runworker does; settling: ingestion.worker)
from jobs.runtime.config import WorkerConfig
from tests.ingestion import site as website
from tests.jobs.helpers import FAST, worker_in_thread


@pytest.fixture
def site():
    with website.serving() as served:
        yield served


@pytest.fixture
def pipeline_settings(settings, tmp_path):
    settings.INGESTION_STORAGE_DIR = tmp_path
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.2
    return settings


@pytest.fixture
def worker(pipeline_settings):
    with worker_in_thread(WorkerConfig.from_settings({"queue": {"default": 4}}, **FAST)) as running:
        yield running
