"""A job's page in headless Chromium: Retry a failed job and watch it succeed without reloading, as
a second run with an attempt and a wait of its own; Cancel a running one from its page; follow a
canceled job to the upstream job that failed, retry that, and see the job run. The list,
a job's page and the dashboard at 1400 px with the admin's sidebar and the filters open, with the
long names real projects have: nothing scrolls sideways and the error stays readable."""

import os
import time

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

import tests.jobs.handlers as handlers
from jobs.queue import services
from jobs.queue.models import Job
from jobs.runtime.config import WorkerConfig
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop, screenshot_for_the_manual, wait_for
from tests.jobs.conftest import enqueue, job
from tests.jobs.helpers import FAST, worker_in_thread

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]


@pytest.fixture
def operator(db):
    User.objects.create_superuser("operator", password="secret-pw")


@pytest.fixture
def worker():
    handlers.FIXED.clear()
    with worker_in_thread(WorkerConfig.from_settings({"queue": {"default": 2}}, **FAST)) as running:
        yield running


@pytest.fixture
def page(live_server, operator, worker):
    """Logged in; started after the fixtures that use the ORM (Playwright runs an event loop here)."""
    with chromium() as browser:
        yield logged_in_page(browser, live_server.url, username="operator", password="secret-pw")


def job_url(live_server, job_id) -> str:
    return f"{live_server.url}/admin/jobs/job/{job_id}/change/"


def status_of(job_id) -> str:
    return off_loop(lambda: job(job_id).status)


def confirm(page, button: str, *, says: str = "") -> str:
    """Press the page's ``button``, then Confirm in the dialog it opens; return the dialog's question."""
    page.get_by_role("button", name=button, exact=True).click()
    dialog = page.locator("#console-confirm")
    dialog.wait_for()
    question = dialog.locator("p").inner_text()
    assert says in question, question
    dialog.locator("button.default").click()
    return question


RUNS = """[...document.querySelectorAll('.job-run')].map(run => ({
    run: run.dataset.run, waited: Number(run.dataset.waited),
    attempts: [...run.querySelectorAll('.job-attempt')]
        .map(a => [a.dataset.attempt, Number(a.dataset.waited), Number(a.dataset.ran)]),
}))"""


def test_retry_a_failed_job_and_see_a_second_run_with_its_own_attempt_and_wait(live_server, page):
    failed = off_loop(enqueue, task="test.until_fixed", max_attempts=1, args={"report": "monthly", "retries": [1, 2]})
    wait_for(lambda: status_of(failed.job_id) == "failed", timeout=20, what="the job to fail")
    sat_failed = 1.5
    time.sleep(sat_failed)  # the operator takes a while: that is no one's wait
    handlers.FIXED.set()

    page.goto(job_url(live_server, failed.job_id))
    assert "RuntimeError: still broken" in page.locator("#job-errors").inner_text()
    confirm(page, "Retry", says="as run 2, with up to 1 attempt (the job's attempts 2 to 2: max_attempts 1 → 2)")
    page.wait_for_load_state()
    page.evaluate("window.notReloaded = true")
    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)

    assert page.evaluate("window.notReloaded") is True
    assert "put back in its queue for a new run" in page.locator(".messagelist").inner_text()
    # Counted in its run: the job's attempt 2 (attempt numbers go on across runs) is run 2's first.
    assert page.locator("#job-attempt").inner_text() == "attempt 1 of 1 · run 2"
    second, first = page.evaluate(RUNS)
    assert (second["run"], [a[0] for a in second["attempts"]]) == ("2", ["2"])
    assert (first["run"], [a[0] for a in first["attempts"]]) == ("1", ["1"])
    for run in (first, second):
        [(_number, waited, ran)] = run["attempts"]
        assert 0 <= waited < 1.0 and ran >= 0 and run["waited"] == waited  # picked at once, NOTIFY woke the worker
    assert "attempt 1 · run 1" in page.locator("#job-errors").inner_text()
    assert "(this run)" in page.locator("#job-waited").inner_text()
    screenshot_for_the_manual(page, "job-page.png", full_page=True)


def test_cancel_a_running_job_from_its_page(live_server, page):
    running = off_loop(enqueue, task="test.sleep", args={"seconds": 30})
    wait_for(lambda: status_of(running.job_id) == "running", timeout=20, what="the job to run")

    page.goto(job_url(live_server, running.job_id))
    page.get_by_role("button", name="Cancel", exact=True).click()
    page.locator("#console-confirm").wait_for()
    fragments = []
    page.on("request", lambda request: fragments.append(request.url) if "fragment=1" in request.url else None)
    page.wait_for_timeout(2500)  # the body refreshes every second, but not while the dialog asks
    assert not fragments and page.locator("#job-page form[data-confirm]").count() == 1
    page.locator("#console-confirm button.default").click()

    page.locator("#job-status").filter(has_text="canceled").wait_for(timeout=20_000)
    assert status_of(running.job_id) == "canceled"


def test_a_page_whose_job_is_deleted_says_so_and_stops_refreshing(live_server, page):
    running = off_loop(enqueue, task="test.sleep", args={"seconds": 30})
    wait_for(lambda: status_of(running.job_id) == "running", timeout=20, what="the job to run")
    page.goto(job_url(live_server, running.job_id))
    fragments = []
    page.on("request", lambda request: fragments.append(request.url) if "fragment=1" in request.url else None)

    off_loop(lambda: services.job_delete(job_id=running.job_id, force=True))

    page.locator(".live-refresh-gone").wait_for(timeout=10_000)
    asked = len(fragments)
    time.sleep(2.5)  # two more ticks of the refresh, had it gone on
    assert len(fragments) == asked
    assert page.locator(".live-refresh-gone").count() == 1


def test_follow_a_canceled_jobs_upstream_retry_it_and_see_the_job_run(live_server, page):
    upstream = off_loop(enqueue, task="test.until_fixed", max_attempts=1)
    dependent = off_loop(enqueue, task="test.echo", depends_on=[upstream.job_id])
    wait_for(lambda: status_of(dependent.job_id) == "canceled", timeout=20, what="the dependent to be canceled")
    handlers.FIXED.set()

    page.goto(job_url(live_server, dependent.job_id))
    assert f"Upstream job {upstream.job_id} failed." in page.locator("#job-error").inner_text()
    waits_for = page.locator("#job-waits-for")
    assert waits_for.locator(".status-badge").inner_text() == "failed"
    waits_for.get_by_role("link", name="test.until_fixed").click()
    assert page.locator("#job-needed-by .status-badge").inner_text() == "canceled"
    confirm(page, "Retry", says="1 job its end canceled will wait for it again.")
    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)

    page.goto(job_url(live_server, dependent.job_id))
    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)
    assert page.locator("#job-waits-for .status-badge").inner_text() == "succeeded"


# Names as real projects have them: Django tasks are named by their module path; queue names and
# lock keys with no space to wrap at.
TASKS = [
    "myproject.reports.tasks.monthly_revenue_rollup_for_regions",
    "myproject.billing.tasks.reconcile_invoices_with_payment_provider_settlements",
    "myproject.integrations.salesforce.tasks.sync_opportunities_and_accounts_incrementally",
]
LONG_QUEUE = "reports.monthly_revenue_rollups_for_eu_central_and_north_america_regions"
ERROR = (
    'UniqueViolation: duplicate key value violates unique constraint "revenue_rollup_region_month_key"\n'
    "DETAIL:  Key (region, month)=(eu-central, 2026-02) already exists."
)


def long_named_jobs(count: int) -> list:
    """Jobs in every status on a queue no worker serves, with long task, queue and lock key names."""
    specs = [
        services.JobSpec(
            queue=LONG_QUEUE,
            task=TASKS[n % len(TASKS)],
            lock_key=f"tenant_4f0c2d6e_region_eu_central_{n}_" + "month_2026_02_" * 60,
            args={"region": "eu-central", "month": "2026-02", "n": n},
        )
        for n in range(count)
    ]
    ids = [item.job_id for item in services.job_enqueue_many(specs=specs)]
    now = timezone.now()
    for n, status in enumerate(["running", "succeeded", "failed", "canceled", "lost"]):
        finished = {} if status == "running" else {"finished_at": now}
        error = {"error": ERROR} if status in ("failed", "lost") else {}
        Job.objects.filter(job_id__in=ids[n::6]).update(status=status, attempt=1, started_at=now, **finished, **error)
    return ids


SIDEWAYS = "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"


def assert_sidebar_open(page):
    """The apps' sidebar open (the console folds it at first; an operator may open it, Django keeps that)."""
    if not page.evaluate("document.querySelector('#main').classList.contains('shifted')"):
        page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'true')")
        page.reload()
    assert page.evaluate("document.querySelector('#main').classList.contains('shifted')")
    assert page.locator("#nav-sidebar").is_visible()


COLUMN_WIDTHS = (
    "Object.fromEntries([...document.querySelectorAll('#result_list thead th')]"
    ".map(th => [th.className.match(/column-(\\S+)/)?.[1] || 'checkbox', th.getBoundingClientRect().width]))"
)


@pytest.mark.parametrize(
    ("width", "sidebar", "error_at_least"),
    [(1280, False, 200), (1440, False, 200), (1400, True, 120)],
    ids=["1280", "1440", "1400-sidebar-open"],
)
def test_the_list_fits_with_filters_and_long_names_short_queue_names_whole_the_error_readable(
    live_server, page, width, sidebar, error_at_least
):
    off_loop(long_named_jobs, 40)
    off_loop(enqueue, task="reports.daily", queue="demo-reports")
    broken = off_loop(enqueue, task="test.until_fixed", max_attempts=1)
    wait_for(lambda: status_of(broken.job_id) == "failed", timeout=20, what="a failed job")

    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/admin/jobs/job/")

    if sidebar:
        assert_sidebar_open(page)
    assert page.locator("#changelist-filter").is_visible()
    assert "monthly_revenue_rollup_for_regions" in page.locator("#changelist-filter").inner_text()
    if width == 1440:
        screenshot_for_the_manual(page, "job-list.png")
    page_width, viewport = page.evaluate(SIDEWAYS)
    assert page_width <= viewport, (page_width, viewport)  # the page does not scroll sideways
    results = "document.querySelector('#changelist .results')"
    scrolled, shown = page.evaluate(f"[{results}.scrollWidth, {results}.clientWidth]")
    assert scrolled <= shown, (scrolled, shown)  # nor does the list
    # The rows measured in one go: the list refreshes itself live, replacing them between two reads.
    boxes = page.evaluate(
        "[...document.querySelectorAll('#result_list tbody tr')].map(r => r.getBoundingClientRect())"
        ".map(b => [b.height, b.bottom])"
    )
    heights = [height for height, _bottom in boxes]
    visible = sum(1 for _height, bottom in boxes if bottom <= 900)
    assert len(boxes) == 42 and max(heights) < 1.5 * min(heights)  # no row wraps onto a second line
    assert visible >= 20
    widths = page.evaluate(COLUMN_WIDTHS)
    print(f"\ncolumn widths at {width} px (sidebar {'open' if sidebar else 'folded'}): {widths}")  # noqa: T201
    assert widths["error_line"] >= error_at_least, widths
    assert sidebar or widths["error_line"] == max(widths.values()), widths  # the rest goes to the error
    queue = page.locator("#result_list td.field-queue_name span[title=demo-reports]")
    assert queue.evaluate("e => e.scrollWidth <= e.clientWidth"), "demo-reports is cut"  # short names whole
    error = page.locator("#result_list td.field-error_line span[title^=UniqueViolation]").first
    assert error.get_attribute("title") == error.inner_text() == ERROR.split("\n")[0]  # the first line, all on hover
    assert error.evaluate("e => e.clientWidth") >= error_at_least - 10  # some of it, the rest on hover
    assert "still broken" in page.locator("#result_list").inner_text()
    if width == 1440 and os.environ.get("UPDATE_SCREENSHOTS"):
        page.goto(f"{live_server.url}/admin/jobs/job/dashboard/")
        screenshot_for_the_manual(page, "jobs-dashboard.png", full_page=True)


def test_a_job_page_and_the_dashboard_with_long_names_do_not_scroll_sideways(live_server, page):
    ids = off_loop(long_named_jobs, 6)

    for path in [f"/admin/jobs/job/{job_id}/change/" for job_id in ids] + ["/admin/jobs/job/dashboard/"]:
        page.goto(f"{live_server.url}{path}")
        assert_sidebar_open(page)
        page_width, viewport = page.evaluate(SIDEWAYS)
        assert page_width <= viewport, (path, page_width, viewport)
    queue_name = page.locator(f'section[data-queue="{LONG_QUEUE}"] .chart-row span').first.bounding_box()
    bar = page.locator(f'section[data-queue="{LONG_QUEUE}"] .bar').bounding_box()
    assert queue_name["x"] + queue_name["width"] <= bar["x"]  # the name wraps in its cell, not under the bar


def test_delete_is_the_quietest_of_the_buttons(live_server, page):
    [failed] = off_loop(lambda: [job_id for job_id in long_named_jobs(3) if job(job_id).status == "failed"])

    page.goto(job_url(live_server, failed))
    retry, delete = page.get_by_role("button", name="Retry"), page.get_by_role("button", name="Delete")
    look = "e => { const s = getComputedStyle(e); return [s.backgroundColor, s.fontSize, s.fontWeight]; }"
    (retry_fill, retry_size, retry_weight), (delete_fill, delete_size, delete_weight) = (
        retry.evaluate(look),
        delete.evaluate(look),
    )
    retry_box, delete_box = retry.bounding_box(), delete.bounding_box()

    assert delete_fill == "rgba(0, 0, 0, 0)" and retry_fill != delete_fill  # outlined, beside a filled Retry
    assert delete_size == retry_size and int(delete_weight) < int(retry_weight)
    assert delete_box["height"] == retry_box["height"]
    assert delete_box["x"] - (retry_box["x"] + retry_box["width"]) >= 20  # set apart, last


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
    page.locator("#console-confirm").wait_for()  # it asks first, Cancel focused: a stray Enter does nothing
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")

    page.locator("#job-status").filter(has_text="succeeded").wait_for(timeout=20_000)


def test_without_javascript_the_page_and_its_buttons_still_work(live_server, operator, worker):
    failed = enqueue(task="test.until_fixed", max_attempts=1)
    wait_for(lambda: job(failed.job_id).status == "failed", timeout=20, what="the job to fail")
    handlers.FIXED.set()
    with chromium() as browser:
        tab = logged_in_page(
            browser, live_server.url, username="operator", password="secret-pw", java_script_enabled=False
        )
        tab.goto(job_url(live_server, failed.job_id))
        assert "RuntimeError: still broken" in tab.locator("#job-errors").inner_text()
        tab.get_by_role("button", name="Retry").click()
        tab.wait_for_load_state()
        assert "Retry this job? It runs again" in tab.locator("#job-question").inner_text()  # a page asks first
        tab.get_by_role("button", name="Yes, retry it").click()
        tab.wait_for_load_state()
        assert "put back in its queue" in tab.locator(".messagelist").inner_text()
        wait_for(lambda: status_of(failed.job_id) == "succeeded", timeout=20, what="the retried job to succeed")
        tab.reload()  # no live refresh without JavaScript: a reload shows the end
        assert tab.locator("#job-status").inner_text() == "succeeded"
