"""A job's page in headless Chromium: Retry a failed job and watch it succeed without reloading;
Cancel a running one from its page."""

import os
from pathlib import Path

import pytest
from django.contrib.auth.models import User

import tests.jobs.handlers as handlers
from jobs.worker import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import launch_chromium, logged_in_page, needs_chromium, off_loop, wait_for
from tests.jobs.conftest import enqueue, job
from tests.jobs.helpers import FAST, worker_in_thread

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "job-page.png"

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]


@pytest.fixture
def operator(db):
    User.objects.create_superuser("operator", password="secret-pw")


@pytest.fixture
def worker():
    handlers.FIXED.clear()
    with worker_in_thread(WorkerConfig.from_settings({"default": 2}, **FAST)) as running:
        yield running


@pytest.fixture
def page(live_server, operator, worker):
    """Logged in; started after the fixtures that use the ORM (Playwright runs an event loop here)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            yield logged_in_page(browser, live_server.url, username="operator", password="secret-pw")
        finally:
            browser.close()


def job_url(live_server, job_id) -> str:
    return f"{live_server.url}/admin/jobs/job/{job_id}/change/"


def status_of(job_id) -> str:
    return off_loop(lambda: job(job_id).status)


def test_retry_a_failed_job_and_watch_it_succeed_without_reloading(live_server, page):
    failed = off_loop(enqueue, task="test.until_fixed", max_attempts=1, args={"report": "monthly", "retries": [1, 2]})
    wait_for(lambda: status_of(failed.job_id) == "failed", timeout=20, what="the job to fail")
    handlers.FIXED.set()

    page.goto(job_url(live_server, failed.job_id))
    assert "RuntimeError: still broken" in page.locator("#job-errors").inner_text()
    page.get_by_role("button", name="Retry").click()
    page.wait_for_load_state()
    page.evaluate("window.notReloaded = true")
    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)

    assert page.evaluate("window.notReloaded") is True
    assert "put back in its queue" in page.locator(".messagelist").inner_text()
    if os.environ.get("UPDATE_SCREENSHOTS"):  # docs/job-page.png, linked from the README
        page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_cancel_a_running_job_from_its_page(live_server, page):
    running = off_loop(enqueue, task="test.sleep", args={"seconds": 30})
    wait_for(lambda: status_of(running.job_id) == "running", timeout=20, what="the job to run")

    page.goto(job_url(live_server, running.job_id))
    page.get_by_role("button", name="Cancel").click()

    page.locator("#job-status").filter(has_text="canceled").wait_for(timeout=20_000)
    assert status_of(running.job_id) == "canceled"


def test_the_list_shows_twenty_jobs_a_line_each_at_1400_px(live_server, page):
    for n in range(40):  # on queues no worker serves: they stay queued
        off_loop(enqueue, task="reports.build" if n % 2 else "sync.pull", queue=f"reports-{n % 3}", args={"n": n})
    broken = off_loop(enqueue, task="test.until_fixed", max_attempts=1)
    wait_for(lambda: status_of(broken.job_id) == "failed", timeout=20, what="a failed job")

    page.goto(f"{live_server.url}/admin/jobs/job/")

    if os.environ.get("UPDATE_SCREENSHOTS"):
        page.screenshot(path=str(SCREENSHOT.with_name("job-list.png")))
    rows = page.locator("#result_list tbody tr")
    heights = [box["height"] for box in (rows.nth(i).bounding_box() for i in range(rows.count()))]
    visible = sum(1 for i in range(rows.count()) if rows.nth(i).bounding_box()["y"] + heights[i] <= 900)
    assert rows.count() == 41 and max(heights) < 2 * min(heights)  # no row wraps onto a second line
    assert visible >= 20
    results = "document.querySelector('#changelist .results')"
    widths = page.evaluate(f"[{results}.scrollWidth, {results}.clientWidth]")
    assert widths[0] <= widths[1], widths  # nothing cut at the right
    assert "still broken" in page.locator("#result_list").inner_text()
    if os.environ.get("UPDATE_SCREENSHOTS"):
        page.goto(f"{live_server.url}/admin/jobs/job/dashboard/")
        page.screenshot(path=str(SCREENSHOT.with_name("jobs-dashboard.png")), full_page=True)


def test_the_retry_button_is_reached_and_pressed_with_the_keyboard(live_server, page):
    failed = off_loop(enqueue, task="test.until_fixed", max_attempts=1)
    wait_for(lambda: status_of(failed.job_id) == "failed", timeout=20, what="the job to fail")
    handlers.FIXED.set()
    page.goto(job_url(live_server, failed.job_id))

    for _ in range(80):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == "Retry":
            break
    else:
        raise AssertionError("Tab never reached the Retry button")
    page.keyboard.press("Enter")

    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)


def test_without_javascript_the_page_and_its_buttons_still_work(live_server, operator, worker):
    from playwright.sync_api import sync_playwright

    failed = enqueue(task="test.until_fixed", max_attempts=1)
    wait_for(lambda: job(failed.job_id).status == "failed", timeout=20, what="the job to fail")
    handlers.FIXED.set()
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            tab = logged_in_page(
                browser, live_server.url, username="operator", password="secret-pw", java_script_enabled=False
            )
            tab.goto(job_url(live_server, failed.job_id))
            assert "RuntimeError: still broken" in tab.locator("#job-errors").inner_text()
            tab.get_by_role("button", name="Retry").click()
            tab.wait_for_load_state()
            assert "put back in its queue" in tab.locator(".messagelist").inner_text()
            wait_for(lambda: status_of(failed.job_id) == "succeeded", timeout=20, what="the retried job to succeed")
            tab.reload()  # no live refresh without JavaScript: a reload shows the end
            assert tab.locator("#job-status").inner_text() == "succeeded"
        finally:
            browser.close()
