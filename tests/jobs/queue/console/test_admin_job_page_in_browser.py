"""A job's page in headless Chromium: its state in words (a countdown to when it is due, ticking; the
jobs it waits for, linked; what holds its queue), its buttons asking first with what will change
(Cancel changes nothing, Confirm acts), their keys (r, c, d; u up to the list as it was filtered),
and no serious accessibility violation on the new states' pages in either theme."""

import re

import pytest
from django.contrib.auth.models import User

from jobs.queue import services
from jobs.queue.models import Job
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.core.test_accessibility_in_browser import BLOCKING, MEASURE_CONTRAST
from tests.helpers import chromium, needs_chromium, off_loop, operator_page
from tests.jobs.queue.console.test_job_states import make

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

AA = 4.5


@pytest.fixture
def jobs(db):
    User.objects.create_superuser("operator", password="secret-pw")
    made = {state: make(state) for state in ("available", "scheduled", "retryable", "waiting", "failed")}
    services.queue_pause(queue="q1", by="operator")
    return made


@pytest.fixture
def browser(jobs):
    with chromium() as browser:
        yield browser


def page_of(job_id) -> str:
    return f"/admin/jobs/job/{job_id}/change/"


def status_of(job_id) -> str:
    return off_loop(lambda: Job.objects.get(job_id=job_id).status)


def test_a_due_later_job_counts_down_and_a_waiting_one_links_what_it_waits_for(live_server, browser, jobs):
    page = operator_page(browser, live_server.url, page_of(jobs["scheduled"]))

    detail = page.locator("#job-state-detail")
    assert page.locator("#job-status").inner_text() == "scheduled"
    text = detail.inner_text()
    assert re.fullmatch(
        r"· due \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in 59 min \d+ s\) · queue paused · no live worker serves queue q1",
        text,
    ), text
    countdown = detail.locator("time.countdown")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", countdown.get_attribute("title"))
    first = countdown.inner_text()
    page.wait_for_function(f"() => document.querySelector('#job-state-detail time').textContent !== {first!r}")

    page.goto(f"{live_server.url}{page_of(jobs['retryable'])}")
    assert page.locator("#job-status").inner_text() == "retryable"
    assert page.locator("#job-state-detail").inner_text().startswith("· next attempt 2 of 5 at ")
    assert page.locator("#job-attempt").inner_text() == "attempt 1 of 5"

    page.goto(f"{live_server.url}{page_of(jobs['waiting'])}")
    assert page.locator("#job-state-detail").inner_text().startswith("· for 1 job: reports.build · queue paused")
    waiting_page = page.url
    page.locator("#job-state-detail a").click()
    page.wait_for_url(lambda url: url != waiting_page)  # loaded: not the page before it
    assert page.locator("#job-status").inner_text() == "running"  # the job it waits for


def test_r_asks_first_cancel_changes_nothing_and_confirm_retries(live_server, browser, jobs):
    failed = jobs["failed"]
    page = operator_page(browser, live_server.url, page_of(failed))
    posts = []
    page.on("request", lambda request: posts.append(request.url) if request.method == "POST" else None)

    page.keyboard.press("r")
    dialog = page.locator("#console-confirm")
    dialog.wait_for()
    question = dialog.locator("p").inner_text()
    assert question == (
        "Retry this job? It runs again in queue q1 as run 2, with up to 5 attempts "
        "(the job's attempts 2 to 6: max_attempts 5 → 6)."
    )
    dialog.get_by_role("button", name="Cancel").click()
    page.wait_for_timeout(500)
    assert not posts and status_of(failed) == "failed" and not dialog.is_visible()

    page.keyboard.press("r")
    dialog.get_by_role("button", name="Retry").click()
    page.wait_for_load_state()
    assert "put back in its queue for a new run" in page.locator(".messagelist").inner_text()
    assert status_of(failed) == "queued" and len(posts) == 1
    assert page.locator("#job-status").inner_text() == "available"
    assert page.locator("#job-attempt").inner_text() == "attempt 0 of 5 · run 2"


def test_d_deletes_after_asking_and_leads_back_to_the_list_as_it_was_filtered(live_server, browser, jobs):
    page = operator_page(browser, live_server.url, "/admin/jobs/job/?state=failed")
    page.locator("#result_list th.field-short_id a").first.click()
    page.wait_for_url(re.compile(r"/admin/jobs/job/[0-9a-f-]+/change/"))  # loaded, its keys listening

    page.keyboard.press("d")
    dialog = page.locator("#console-confirm")
    assert dialog.locator("p").inner_text() == "Delete this failed job and its 1 event? This cannot be undone."
    dialog.get_by_role("button", name="Delete").click()

    page.wait_for_url(re.compile(r"/admin/jobs/job/\?state=failed$"))
    assert "deleted with its events" in page.locator(".messagelist").inner_text()
    assert not off_loop(lambda: Job.objects.filter(job_id=jobs["failed"]).exists())


def test_c_asks_before_canceling_a_queued_job(live_server, browser, jobs):
    page = operator_page(browser, live_server.url, page_of(jobs["available"]))

    page.keyboard.press("c")
    dialog = page.locator("#console-confirm")
    assert dialog.locator("p").inner_text() == "Cancel this job? It leaves queue q1 at once and will not run."
    dialog.get_by_role("button", name="Cancel the job").click()

    page.locator("#job-status").filter(has_text="canceled").wait_for()
    assert status_of(jobs["available"]) == "canceled"


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_new_states_pages_have_no_serious_violation_and_reach_aa(live_server, browser, jobs, theme):
    from axe_playwright_python.sync_playwright import Axe

    found, weak = {}, {}
    page = operator_page(browser, live_server.url, "/admin/", color_scheme=theme)
    paths = [page_of(jobs[state]) for state in ("available", "scheduled", "retryable", "waiting")]
    paths += [f"/admin/jobs/job/{jobs['failed']}/act/retry/", f"/admin/jobs/job/{jobs['available']}/act/cancel/"]
    for path in paths:
        page.goto(f"{live_server.url}{path}")
        blocking = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
        if blocking:
            found[path] = blocking
        weak.update({m["what"]: round(m["ratio"], 2) for m in page.evaluate(MEASURE_CONTRAST) if m["ratio"] < AA})
    page.goto(f"{live_server.url}{page_of(jobs['failed'])}")
    page.keyboard.press("r")  # the dialog, open
    page.locator("#console-confirm").wait_for()
    blocking = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
    assert not found and not blocking, (found, blocking)
    assert not weak, weak
