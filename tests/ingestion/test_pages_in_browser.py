"""The /pipeline pages in headless Chromium: Run a source served by a local website, watch the
run end without reloading, see its problems, retry the failed item once the site is fixed (the
page asks first); the live refresh keeps the page's filters and page, and never throws away a
choice being made; a run started from the page shows who started it; a run of 100,000 items is a
page of a few thousand pixels; and no page has a serious accessibility violation in either theme."""

import shutil
from itertools import pairwise

import pytest
from django.contrib.auth.models import User

from ingestion import services
from ingestion.models import IngestionRun, Source
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop, screenshot_for_the_manual
from tests.ingestion import site as website
from tests.ingestion.helpers import planted_run

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]
BLOCKING = ("serious", "critical")


@pytest.fixture
def site(settings, tmp_path):
    settings.INGESTION_STORAGE_DIR = tmp_path
    settings.INGESTION_SETTLE_PERIOD_SEC = 0.2
    with website.serving() as served:
        Source.objects.create(name="City hall", start_url=served.url("/index.html"), crawl_delay_sec=0)
        User.objects.create_superuser("operator", password="secret-pw")
        yield served


@pytest.fixture
def browser():
    """Started after the fixtures that use the ORM (``chromium``)."""
    with chromium() as launched:
        yield launched


@pytest.mark.skipif(not shutil.which("tesseract"), reason="needs tesseract-ocr")
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
    assert "Retry the 1 failed item of this run?" in page.get_by_role("dialog").inner_text()
    page.get_by_role("dialog").get_by_role("button", name="Retry failed").click()
    page.wait_for_load_state()
    page.evaluate("window.notReloaded = true")
    status.filter(has_text="completed").wait_for(timeout=60_000)
    assert page.evaluate("window.notReloaded") is True
    assert "completed" in page.locator("#list-ocr tr", has_text="Broken link").inner_text()
    screenshot_for_the_manual(page, "pipeline-run.png", full_page=True)


@pytest.fixture
def history(settings):
    """An active run (its page refreshes) and 30 failed and 5 completed ones (two pages of failed)."""
    User.objects.create_superuser("watcher", password="secret-pw")
    source = Source.objects.create(name="Archive", start_url="http://127.0.0.1:9/")
    services.run_create(source_id=source.id)  # pending: the list stays live
    for number in range(35):
        run = services.run_create(source_id=source.id)
        status = "failed" if number < 30 else "completed"
        services.run_update(run_id=run.id, status="running")
        services.run_update(run_id=run.id, status=status, error_message=f"run {number}" if status == "failed" else None)
    return source


def test_the_live_refresh_keeps_the_pages_filters_and_page_and_what_the_operator_is_choosing(
    live_server, history, browser
):
    page = logged_in_page(browser, live_server.url, username="watcher", password="secret-pw")
    refreshes = []
    page.on("request", lambda request: "fragment=1" in request.url and refreshes.append(request.url))
    page.goto(f"{live_server.url}/pipeline/?status=failed&page=2")
    page.evaluate("window.notReloaded = true")

    page.wait_for_timeout(4500)  # two refreshes
    assert len(refreshes) >= 2
    assert all("status=failed" in url and "page=2" in url for url in refreshes), refreshes
    assert page.evaluate("window.notReloaded") is True
    assert "page 2 of 2" in page.locator(".paginator").inner_text()
    history_rows = page.locator("table.pipeline").nth(2).locator("tbody tr")
    assert history_rows.count() == 5 and all("failed" in row for row in history_rows.all_inner_texts())
    assert page.locator("#history-status").input_value() == "failed"

    page.select_option("#history-status", "completed")  # chosen, not yet sent
    page.locator("h2").first.click()  # the focus leaves the field
    seen = len(refreshes)
    page.wait_for_timeout(4500)
    assert len(refreshes) == seen  # no refresh threw the choice away
    assert page.locator("#history-status").input_value() == "completed"
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/pipeline/?source=&status=completed")
    assert page.locator("table.pipeline").nth(2).locator("tbody tr").count() == 5


def test_a_run_started_from_the_page_names_who_started_it_and_its_source(live_server, history, browser):
    page = logged_in_page(browser, live_server.url, username="watcher", password="secret-pw", next_path="/pipeline/")
    page.get_by_role("button", name="Run Archive").click()
    page.wait_for_url("**/pipeline/runs/*/")

    run = off_loop(lambda: IngestionRun.objects.filter(source=history).order_by("-created_at").first())
    crumbs = page.locator(".breadcrumbs li")
    assert crumbs.all_inner_texts() == ["Home", "Pipeline runs", f"Run {str(run.id)[:8]} of Archive"]
    boxes = [crumb.bounding_box() for crumb in crumbs.all()]
    gaps = [later["x"] - (earlier["x"] + earlier["width"]) for earlier, later in pairwise(boxes)]
    assert abs(gaps[0] - gaps[1]) < 1, gaps  # "Pipeline runs › Run ...", spaced as "Home › Pipeline runs"
    trail = page.locator('#audit-trail tr[data-action="run.start"]')
    assert "watcher" in trail.inner_text()
    assert "No operator has acted" not in page.locator("#audit-trail").inner_text()


@pytest.fixture
def big_run(db):
    User.objects.create_superuser("operator", password="secret-pw")
    return planted_run(items=100_000, jobs=50, failed_jobs=5)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_run_of_100000_items_is_a_short_page_and_no_pipeline_page_or_list_has_a_serious_violation(
    live_server, big_run, browser, theme
):
    from axe_playwright_python.sync_playwright import Axe

    page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
    found = {}
    admin_lists = [f"/admin/ingestion/ingestionitem/?run={big_run.id}", "/admin/ingestion/ingestionrun/"]
    for path in (f"/pipeline/runs/{big_run.id}/", "/pipeline/", *admin_lists, "/admin/ingestion/source/"):
        page.goto(f"{live_server.url}{path}")
        blocking = [v for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
        if blocking:
            found[path] = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
    page.goto(f"{live_server.url}/pipeline/runs/{big_run.id}/")
    height = page.evaluate("document.documentElement.scrollHeight")
    skipped = page.locator("#list-ocr tr", has_text="skipped").first.inner_text()
    assert not found, found
    assert height < 6000, height
    assert "OCR is not installed on this worker" in skipped
