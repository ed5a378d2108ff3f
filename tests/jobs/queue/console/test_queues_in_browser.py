"""The queues page, the workers page and the dashboard in headless Chromium: no serious accessibility
violation in either theme; the window switches between an hour, a day and a week, the y-axis with
values and its unit; a queue's limits form stays shut until Edit limits opens it, filled with the
limits as they stand, and stays open through a live refresh; the warning on a queue no worker
serves; Pause asks first, saying how many queued jobs it holds back; a worker's running job."""

import uuid

import pytest
from django.contrib.auth.models import User

from jobs.queue import services
from jobs.queue.console.charts import round_scale
from jobs.queue.models import Queue
from jobs.queue.states import FINISHED
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop, screenshot_for_the_manual
from tests.jobs.queue.console.conftest import queued, ran

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

BLOCKING = ("serious", "critical")
QUEUES, WORKERS, DASHBOARD = "/admin/jobs/queue/", "/admin/jobs/worker/", "/admin/jobs/job/dashboard/"


@pytest.fixture
def world(db):
    User.objects.create_superuser("operator", password="secret-pw")
    worker_id = uuid.uuid4()
    services.worker_register(worker_id=worker_id, hostname="worker-host-7", pid=1501, queues={"etl": 4})
    ran("etl", "succeeded", "succeeded", "succeeded", "fatal", "canceled")
    [running] = queued("etl")
    services.jobs_claim(queue="etl", limit=1, worker_id=f"worker-host-7:1501:{str(worker_id)[:8]}")
    queued("etl", 3)
    queued("nobody-serves")
    services.queue_limits_set(queue="etl", max_running=2, rate_limit=10, rate_period_sec=60, by="ops")
    return {"running": running}


@pytest.fixture
def page(live_server, world):
    with chromium() as browser:
        yield logged_in_page(browser, live_server.url, username="operator", password="secret-pw")


def blocking_violations(page) -> list:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        (v["id"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in BLOCKING
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_three_pages_have_no_serious_accessibility_violation(live_server, world, theme):
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
        found = {}
        for path in (QUEUES, f"{QUEUES}?window=week", WORKERS, DASHBOARD, f"{DASHBOARD}?window=day"):
            page.goto(f"{live_server.url}{path}")
            if page.locator("details.queue-limits-edit").count():
                page.locator("details.queue-limits-edit summary").first.click()  # a form open too
            if violations := blocking_violations(page):
                found[path] = violations
    assert not found, found


def test_the_window_switches_and_the_y_axis_says_its_values_and_unit(live_server, page):
    page.goto(f"{live_server.url}{DASHBOARD}")
    chart = page.locator("#throughput-chart")
    assert chart.locator(".bucket").count() == 60
    assert chart.locator(".y-axis .unit").inner_text() == "jobs/min"
    peak = max(
        sum(int(bucket.get_attribute(f"data-{s}")) for s in FINISHED) for bucket in chart.locator(".bucket").all()
    )
    assert chart.locator(".y-axis .tick").all_inner_texts() == [str(tick) for tick in round_scale(peak, intervals=4)]
    assert peak >= 3 and chart.locator(".y-axis .tick").first.inner_text() == "0"
    assert "3 succeeded, 1 failed, 1 canceled, 0 lost" in chart.locator(".columns").get_attribute("aria-label")

    page.get_by_role("link", name="the last week").click()
    page.wait_for_url("**window=week")
    assert chart.locator(".bucket").count() == 168 and chart.locator(".y-axis .unit").inner_text() == "jobs/h"
    assert page.get_by_role("link", name="the last week").get_attribute("aria-current") == "page"
    labels = [label for label in chart.locator(".x-axis span").all_inner_texts() if label]
    assert len(labels) == 7  # one a day, at midnight
    chart.get_by_text("All queues as a table").click()
    assert chart.locator("table tbody tr").count() in (1, 2)  # the hour the jobs finished in (or two, straddled)


def test_the_limits_form_opens_on_demand_filled_in_and_stays_open_through_a_refresh(live_server, page):
    page.goto(f"{live_server.url}{QUEUES}")
    row = page.locator('section[data-queue="etl"]')
    assert "limits: max 2 running · 10 per 60 s" in row.inner_text()
    form = row.locator("form.queue-limits-form")
    assert not form.is_visible()

    row.get_by_text("Edit limits").click()
    assert form.is_visible()
    assert form.locator("input[name=max_running]").input_value() == "2"
    assert form.locator("input[name=rate_limit]").input_value() == "10"
    assert form.locator("input[name=rate_period_sec]").input_value() == "60"
    assert not form.locator("input[name=per_partition]").is_checked()
    with page.expect_response(lambda response: "fragment=1" in response.url):  # the live refresh, every 5 s
        pass
    page.wait_for_timeout(200)
    assert page.locator('section[data-queue="etl"] form.queue-limits-form').is_visible()

    page.locator('section[data-queue="etl"] input[name=max_running]').fill("3")
    page.locator('section[data-queue="etl"]').get_by_role("button", name="Set limits of etl").click()
    page.wait_for_url(f"**{QUEUES}?window=hour")
    assert "limits: max 3 running" in page.locator('section[data-queue="etl"]').inner_text()
    assert off_loop(lambda: Queue.objects.get(name="etl").max_running) == 3


def test_a_queue_no_worker_serves_warns_and_pause_asks_first(live_server, page):
    page.goto(f"{live_server.url}{QUEUES}")
    assert page.locator(".queues-count").inner_text() == "2 queues"  # etl, nobody-serves
    warning = page.locator('section[data-queue="nobody-serves"] .queue-warning')
    assert warning.inner_text() == "No worker serves this queue: 1 job waits."
    assert page.locator('section[data-queue="etl"] .queue-warning').count() == 0
    assert "1 live worker · 4 slots" in page.locator('section[data-queue="etl"]').inner_text()
    screenshot_for_the_manual(page, "queues.png", full_page=True)

    page.get_by_role("button", name="Pause etl").click()
    dialog = page.get_by_role("dialog", name="Please confirm")
    assert (
        "Pause etl? Its 3 queued jobs stay queued until it is resumed; its 1 running job finishes."
        in dialog.inner_text()
    )
    dialog.get_by_role("button", name="Cancel").click()
    assert off_loop(lambda: Queue.objects.get(name="etl").paused) is False
    page.get_by_role("button", name="Pause etl").click()
    with page.expect_navigation():
        dialog.get_by_role("button", name="Confirm").click()
    assert off_loop(lambda: Queue.objects.get(name="etl").paused) is True
    assert page.get_by_role("button", name="Resume etl").is_visible()


def test_the_workers_page_shows_what_each_worker_runs(live_server, page, world):
    page.goto(f"{live_server.url}{WORKERS}")
    row = page.locator("#workers tbody tr", has_text="worker-host-7")

    assert row.locator(".worker-pid").inner_text() == "1501"
    assert row.locator(".worker-pid").evaluate("cell => getComputedStyle(cell).whiteSpace") == "nowrap"
    job = row.locator(f'.running-job[data-job="{world["running"]}"]')
    assert job.get_by_role("link", name="t").get_attribute("href") == f"/admin/jobs/job/{world['running']}/change/"
    assert "on etl, started" in job.inner_text() and job.locator("time.moment").count() == 1
    assert "alive" in row.inner_text() and "etl × 4" in row.inner_text()
    screenshot_for_the_manual(page, "workers.png")
