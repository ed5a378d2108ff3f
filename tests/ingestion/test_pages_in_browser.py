"""The /pipeline pages in headless Chromium: Run a source served by a local website, watch the
run end without reloading, see its problems, retry the failed item once the site is fixed."""

import os
import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User

import ingestion.job_handlers  # noqa: F401  (registers the tasks and the settle task, as runworker does)
from ingestion.models import Source
from jobs.worker import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import launch_chromium, logged_in_page, needs_chromium
from tests.ingestion import site as website
from tests.jobs.helpers import FAST, worker_in_thread

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "pipeline-run.png"

pytestmark = [
    ALL_DATABASES_COMMITTED,
    needs_chromium,
    pytest.mark.skipif(not shutil.which("tesseract"), reason="needs tesseract-ocr"),
]


@pytest.fixture
def site(settings, tmp_path):
    settings.INGESTION_STORAGE_DIR = tmp_path
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.2
    with website.serving() as served:
        Source.objects.create(name="City hall", start_url=served.url("/index.html"), crawl_delay_sec=0)
        User.objects.create_superuser("operator", password="secret-pw")
        yield served


@pytest.fixture
def worker():
    with worker_in_thread(WorkerConfig.from_settings({"default": 4}, **FAST)) as running:
        yield running


@pytest.fixture
def browser():
    """Started after the fixtures that use the ORM: Playwright's sync API runs an event loop in
    this thread, where Django would refuse (or keep apart) database work."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        try:
            yield launched
        finally:
            launched.close()


def test_run_watch_see_problems_retry_and_complete(live_server, site, worker, browser):
    page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", next_path="/pipeline/")
    page.get_by_role("button", name="Run City hall").click()
    page.wait_for_url("**/pipeline/runs/*/")
    page.evaluate("window.notReloaded = true")

    status = page.locator("#run-status")
    status.filter(has_text="failed").wait_for(timeout=60_000)
    assert page.evaluate("window.notReloaded") is True  # the body refreshed itself
    problems = page.locator("#problems")
    assert "HTTP 404" in problems.inner_text()
    assert "needs review: too little text" in problems.inner_text()
    assert "1 item(s) failed" in page.locator("#run-error").inner_text()

    site.files["/docs/missing.pdf"] = ("application/pdf", website.pdf("The missing report is back online now."))
    page.get_by_role("button", name="Retry failed").click()
    page.wait_for_load_state()
    page.evaluate("window.notReloaded = true")
    status.filter(has_text="completed").wait_for(timeout=60_000)
    assert page.evaluate("window.notReloaded") is True
    assert "Broken link\tcompleted" in page.locator("#list-ocr").inner_text()
    if os.environ.get("UPDATE_SCREENSHOTS"):  # the README's picture: UPDATE_SCREENSHOTS=1 make test
        page.screenshot(path=str(SCREENSHOT), full_page=True)
