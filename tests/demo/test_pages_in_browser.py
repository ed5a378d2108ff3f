"""The demo in headless Chromium, as someone who just ran `make run` and `make demo` sees it: the
run on the service's own site goes discover → download → OCR to completed, and the jobs dashboard,
the schedules, the tracking and the processes admin pages show the demo's rows."""

import re
import shutil
import time

import pytest
from django.contrib.auth.models import User

import ingestion.job_handlers  # noqa: F401  (registers the tasks, as runworker does; settling: ingestion.worker)
import pipeline_project.demo.job_handlers  # noqa: F401
from ingestion.models import IngestionRun
from jobs.runtime.config import WorkerConfig
from pipeline_project.demo import config, services
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium
from tests.jobs.helpers import FAST, worker_in_thread

pytestmark = [
    ALL_DATABASES_COMMITTED,
    needs_chromium,
    pytest.mark.skipif(not shutil.which("tesseract"), reason="needs tesseract-ocr"),
]
SERVES = {"queue": {"default": 4, "demo-etl": 2, "demo-reports": 1}, "namespace": {"demo": 2}}


@pytest.fixture
def demo(live_server, settings, tmp_path):
    """The demo installed against the live server, a worker serving what `make run`'s does (but
    the database-state engine's queue), and an operator."""
    settings.INGESTION_STORAGE_DIR = tmp_path
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.2
    User.objects.create_superuser("operator", password="secret-pw")
    services.demo_install(base_url=live_server.url)
    run = IngestionRun.objects.get(source__name=config.SOURCE_NAME)
    with worker_in_thread(WorkerConfig.from_settings(SERVES, **FAST)):
        yield run


@pytest.fixture
def browser(demo):
    with chromium() as launched:
        yield launched


def listed_once_there(page, url: str, text: str, timeout_sec: float = 60) -> str:
    """The list at ``url`` once it shows ``text`` (reloaded each second: the worker is getting there)."""
    deadline = time.monotonic() + timeout_sec
    while True:
        page.goto(url)
        rows = page.locator("#result_list")
        listed = rows.inner_text() if rows.count() else ""
        if text in listed or time.monotonic() > deadline:
            return listed
        page.wait_for_timeout(1000)


def test_the_demos_run_completes_and_every_page_shows_the_demo(live_server, demo, browser):
    page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", next_path="/pipeline/")
    assert config.SOURCE_NAME in page.locator("body").inner_text()  # the runs page lists the demo source

    page.goto(f"{live_server.url}/pipeline/runs/{demo.id}/")
    page.locator("#run-status").filter(has_text="completed").wait_for(timeout=90_000)
    ocr = page.locator("#list-ocr").inner_text()
    for document in ("Annual report 2024", "Budget summary 2025", "Letter to residents"):
        assert re.search(rf"^{document} · [a-z_ ]+\tcompleted\t", ocr, re.MULTILINE), ocr  # its label, its type

    page.goto(f"{live_server.url}/admin/jobs/job/dashboard/")
    dashboard = page.locator("body").inner_text()
    assert "demo-etl" in dashboard and "demo-reports" in dashboard

    failed = listed_once_there(page, f"{live_server.url}/admin/jobs/job/?queue=demo-etl&status=failed", "failed 1/5")
    assert "FatalError: the demo's bad input" in failed

    page.goto(f"{live_server.url}/admin/schedules/schedule/")
    assert config.SCHEDULE_NAME in page.locator("#result_list").inner_text()

    page.goto(f"{live_server.url}/admin/tracking/pipelinetracking/?q=demo-")
    tracked = page.locator("#result_list").inner_text()
    assert all(filename in tracked for filename in config.TRACKING_FILES)

    page.goto(f"{live_server.url}/admin/processes/process/")
    processes = page.locator("#result_list")
    processes.filter(has_text="demo-order-broken").wait_for()
    assert all(process_id in processes.inner_text() for process_id in config.PROCESS_IDS)
    assert "error" in page.locator("#result_list tr", has_text="demo-order-broken").inner_text()
