"""The console frame in headless Chromium, on every admin and /pipeline page: full width at 1280
and 1440 px; every changelist, with rows of the long values real projects have, cuts no header or
cell (its table scrolls in its own box, the key column pinned, the page itself never sideways);
times tick; a copy button copies; the "?" list of keys opens and closes, "g j" leads to the jobs;
Live/Paused stops the polling and is remembered; a data-confirm form asks first (and the page holds
still while it asks); axe finds nothing serious in either theme."""

import re
import uuid
from datetime import timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.utils import timezone

from ingestion.models import IngestionItem, IngestionRun, Source
from jobs.dbstates.models import Instance, Name, PrepareJob, State
from jobs.processes.models import Process
from jobs.queue import services
from jobs.queue.models import Job, JobStatus, PeriodicTask, Queue, Worker
from pipeline_project.audit.models import AuditEntry
from pipeline_project.core import services as core_services
from pipeline_project.web.times import copyable_html, countdown_html
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop, operator_page
from tracking.models import PipelineTracking

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

BLOCKING = ("serious", "critical")
LONG_TASK = "myproject.reports.monthly.tasks.build_the_monthly_rollup_for_every_customer_region"
IMAGE = "registry.example.org/platform/postgres-with-extensions:15.6-postgis-3.4-timescale-2.14@sha256:" + "a1" * 32


def sha(n: int) -> str:
    return f"{n:02x}" * 32


@pytest.fixture
def rows(db):
    """A superuser, and rows of every model the admin lists, with long ids, names and images (the
    operator groups come with the migrations)."""
    User.objects.create_superuser("operator", password="secret-pw")
    core_services.api_token_create(name="the ingestion daemon on worker-host-17.eu-central-1.internal")
    now = timezone.now()
    spec = services.JobSpec(queue="reports-monthly-rollups", task=LONG_TASK, lock_key=f"k-{uuid.uuid4()}")
    job_id = services.job_enqueue(spec=spec).job_id
    Queue.objects.update_or_create(
        name="reports-monthly-rollups", defaults={"max_running": 4, "rate_limit": 10, "rate_period_sec": 60}
    )
    Worker.objects.create(
        worker_id=uuid.uuid4(),
        hostname="worker-host-17.eu-central-1.compute.internal",
        pid=123456,
        queues={"reports-monthly-rollups": 8, "default": 4, "ingestion-downloads": 16},
    )
    PeriodicTask.objects.create(
        name="jobs.queue.maintenance.prune_finished_jobs_older_than_retention", last_started_at=now
    )
    Process.objects.create(
        namespace="ingestion.document_pipeline",
        process_id=f"proc-{uuid.uuid4()}",
        status="running",
        status_changed_at=now,
        created_at=now,
    )
    source = Source.objects.create(
        name="City hall of a long-named municipality", start_url="https://example.org/" + "a" * 80
    )
    run = IngestionRun.objects.create(source=source, status="failed", error_message="timeout " * 12)
    IngestionItem.objects.create(
        run=run, source=source, item_key=f"sha256:{sha(7)}", stage="documents", item_type="document", status="failed"
    )
    state = State.objects.create(
        state_id=sha(1),
        image_id=IMAGE,
        engine_version="15.6",
        prepare_kind="psql",
        prepare_args_normalized="-f /srv/migrations/0001_initial_schema_with_every_table.sql " * 2,
        task_hash=sha(2),
    )
    Instance.objects.create(
        instance_id=sha(3)[:32], state=state, image_id=IMAGE, runtime_dir="/var/lib/sqlrs/" + sha(4)
    )
    Name.objects.create(name="staging-database-for-the-monthly-reports", state_id=state.state_id, image_id=IMAGE)
    PrepareJob.objects.create(
        job_id=sha(5)[:32], prepare_kind="psql", image_id=IMAGE, request={"args": ["-f", "x.sql"]}
    )
    PipelineTracking.objects.create(filename="events/2026/12/02/" + "partition-" * 8 + ".parquet", shard=17)
    AuditEntry.objects.create(
        actor="token:the ingestion daemon", via="api", action="job.retry", object_type="job", object_ids=[str(job_id)]
    )
    return {"job_id": job_id, "run": run, "soon": now + timedelta(minutes=4)}


def changelists() -> list[str]:
    return [f"/admin/{model._meta.app_label}/{model._meta.model_name}/" for model in admin.site._registry]


# Each table of the page: whether it is cut (cells whose text overflows them while the table does
# not scroll in a box of its own), whether the page scrolls sideways, and the content's width.
MEASURE = """() => {
  const cut = [];
  for (const table of document.querySelectorAll('#content table')) {
    const box = table.closest('.table-scroll');
    const scrolls = box && getComputedStyle(box).overflowX === 'auto';
    for (const cell of table.querySelectorAll('th, td')) {
      if (!cell.getClientRects().length) continue;
      const overflows = cell.scrollWidth > cell.clientWidth + 1;
      const outside = cell.getBoundingClientRect().right > (box || document.documentElement).getBoundingClientRect().right + 1;
      if (overflows || (outside && !scrolls)) cut.push(cell.className + ': ' + cell.innerText.trim().slice(0, 40));
    }
  }
  return {cut, pageScrolls: document.documentElement.scrollWidth > document.documentElement.clientWidth,
          content: document.getElementById('content').getBoundingClientRect().width, viewport: window.innerWidth};
}"""


@pytest.mark.parametrize("width", [1280, 1440])
def test_every_changelist_uses_the_width_and_cuts_no_column(live_server, rows, width):
    found = {}
    with chromium() as browser:
        page = logged_in_page(
            browser,
            live_server.url,
            username="operator",
            password="secret-pw",
            viewport={"width": width, "height": 900},
        )
        for path in [*changelists(), "/admin/jobs/job/dashboard/", "/pipeline/", f"/pipeline/runs/{rows['run'].id}/"]:
            page.goto(f"{live_server.url}{path}")
            measured = page.evaluate(MEASURE)
            if measured["cut"] or measured["pageScrolls"] or measured["content"] < 0.9 * measured["viewport"]:
                found[path] = measured
    assert not found, "\n".join(f"{path}: {measured}" for path, measured in found.items())


@pytest.fixture
def browser(rows):
    """Headless Chromium, started after the fixtures that use the ORM."""
    with chromium() as running:
        yield running


def test_the_key_column_stays_in_sight_while_its_table_scrolls_in_its_own_box(live_server, browser):
    page = operator_page(browser, live_server.url, "/admin/dbstates/state/")
    page.evaluate("document.querySelector('#result_list').closest('.table-scroll').style.width = '500px'")

    scrolled = page.evaluate("""() => {
      const box = document.querySelector('#result_list').closest('.table-scroll');
      box.scrollLeft = box.scrollWidth;
      const key = document.querySelector('#result_list tbody th'), last = document.querySelector('#result_list tbody td:last-child');
      const rect = key.getBoundingClientRect(), at = document.elementFromPoint(rect.left + 5, rect.top + rect.height / 2);
      return {scrolled: box.scrollLeft, keyLeft: rect.left, boxLeft: box.getBoundingClientRect().left,
              keyOnTop: key.contains(at), lastInSight: last.getBoundingClientRect().right <= box.getBoundingClientRect().right + 1,
              pageScrolls: document.documentElement.scrollWidth > document.documentElement.clientWidth};
    }""")

    assert scrolled["scrolled"] > 100 and scrolled["lastInSight"] and not scrolled["pageScrolls"]
    assert abs(scrolled["keyLeft"] - scrolled["boxLeft"]) <= 1 and scrolled["keyOnTop"]


def test_moments_and_countdowns_show_the_zone_and_tick(live_server, browser, rows):
    off_loop(lambda: AuditEntry.objects.update(at=timezone.now() - timedelta(seconds=52)))
    page = operator_page(browser, live_server.url, f"/admin/jobs/job/{rows['job_id']}/change/")
    moment = page.locator("#audit-trail time.moment")
    assert re.fullmatch(r"5\d s ago", moment.inner_text())
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", moment.get_attribute("title"))
    assert "Audit trail (1 entry)" in page.locator("#audit-trail h3").inner_text()

    page.evaluate(
        "html => document.getElementById('content').insertAdjacentHTML('beforeend', html)",
        str(countdown_html(rows["soon"])),
    )
    countdown = page.locator("time.countdown")
    first = countdown.inner_text()
    assert re.fullmatch(r"in [34] min \d+ s", first)
    page.wait_for_function(
        "first => document.querySelector('time.countdown').textContent !== first", arg=first, timeout=3000
    )
    moment.filter(has_text="1 min ago").wait_for(timeout=8000)  # refreshed within 5 s of passing the minute


def test_a_copy_button_copies_the_whole_text_with_or_without_the_clipboard_api(live_server, browser):
    full = "0192f3a4-5b6c-7d8e-9f00-112233445566"
    page = operator_page(browser, live_server.url, "/admin/", permissions=["clipboard-read", "clipboard-write"])
    page.evaluate(
        "html => document.getElementById('content').insertAdjacentHTML('afterbegin', html)",
        str(copyable_html(full, "…445566")),
    )
    shown = page.locator(".copyable")
    assert shown.get_attribute("title") == full and shown.locator(".copyable-text").inner_text() == "…445566"

    page.locator(".copy-button").click()
    assert page.evaluate("navigator.clipboard.readText()") == full
    assert page.locator("#console-announcer").inner_text() == f"Copied {full}"

    page.evaluate("""() => { window.realClipboard = navigator.clipboard; navigator.clipboard.writeText('');
                            Object.defineProperty(navigator, 'clipboard', {value: undefined}); }""")
    page.locator(".copy-button").click()  # the old way: a selection and execCommand("copy")
    assert page.evaluate("window.realClipboard.readText()") == full


def test_the_list_of_keys_opens_with_a_question_mark_and_closes_with_escape(live_server, browser):
    page = operator_page(browser, live_server.url, "/admin/dbstates/state/")
    page.keyboard.press("?")
    overlay = page.get_by_role("dialog", name="Keyboard shortcuts")
    overlay.wait_for()
    listed = overlay.inner_text()
    for expected in (
        "g then j",
        "Job list",
        "g then q",
        "Queues",
        "Search the list",
        "Next row",
        "Show or hide this list",
    ):
        assert expected in listed, expected

    page.keyboard.press("Escape")
    overlay.wait_for(state="hidden")
    page.keyboard.press("?")
    overlay.wait_for()
    page.keyboard.press("?")  # toggles
    overlay.wait_for(state="hidden")


def test_g_j_leads_to_the_jobs_but_not_while_typing_and_slash_finds_the_search(live_server, browser):
    page = operator_page(browser, live_server.url, "/admin/dbstates/state/")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "searchbar"
    page.keyboard.type("g j")
    assert page.input_value("#searchbar") == "g j" and page.url.endswith("/admin/dbstates/state/")

    page.locator("#searchbar").blur()
    page.keyboard.press("g")
    page.keyboard.press("j")
    page.wait_for_url("**/admin/jobs/job/")


def test_j_k_x_and_o_move_select_and_open_a_lists_rows(live_server, browser, rows):
    page = operator_page(browser, live_server.url, "/admin/core/apitoken/")
    page.keyboard.press("j")
    assert page.locator("#result_list tr.keyboard-current").count() == 1
    page.keyboard.press("x")
    assert page.locator("#result_list tr.keyboard-current input.action-select").is_checked()
    assert "1 of 1 selected" in page.locator(".action-counter").inner_text()
    page.keyboard.press("o")
    page.wait_for_url("**/admin/core/apitoken/*/change/")


def fragment_requests(page) -> list[str]:
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "fragment=1" in request.url else None)
    return asked


def soon(page, condition, *, ms: int) -> bool:
    """Whether ``condition()`` holds within ``ms``, waiting in Playwright (its events arrive meanwhile)."""
    for _ in range(ms // 50):
        if condition():
            return True
        page.wait_for_timeout(50)
    return bool(condition())


def test_live_can_be_paused_which_stops_the_polling_and_is_remembered(live_server, browser, rows):
    page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw")
    asked = fragment_requests(page)
    page.goto(f"{live_server.url}/admin/jobs/job/{rows['job_id']}/change/")  # queued: refreshed every second
    assert page.get_by_role("button", name="Live").get_attribute("aria-pressed") == "true"
    toggle = page.locator("#live-toggle")  # its name changes: Live, Paused
    assert soon(page, lambda: asked, ms=3000)

    page.keyboard.press("l")
    assert toggle.get_attribute("aria-pressed") == "false" and toggle.inner_text().strip() == "Paused"
    page.wait_for_timeout(300)  # a request already under way may end
    asked.clear()
    page.wait_for_timeout(2500)
    assert not asked

    page.reload()
    assert toggle.get_attribute("aria-pressed") == "false"
    page.wait_for_timeout(2000)
    assert not asked

    toggle.click()  # resumed: refreshed at once
    assert toggle.get_attribute("aria-pressed") == "true"
    assert soon(page, lambda: asked, ms=600)  # the interval is 1 s


CONFIRMED_FORM = """([action, question]) => {
  const form = document.createElement('form');
  form.method = 'post'; form.action = action; form.id = 'test-form'; form.dataset.confirm = question;
  form.innerHTML = '<input type="hidden" name="confirmed" value="yes"><button type="submit">Cancel it</button>';
  form.prepend(document.querySelector('input[name=csrfmiddlewaretoken]').cloneNode());
  document.getElementById('content').append(form);
}"""


def test_a_data_confirm_form_asks_first_and_posts_only_when_confirmed(live_server, browser, rows):
    job_id = rows["job_id"]
    question = "Cancel this job? It will not run: 1 job changes."
    page = operator_page(browser, live_server.url, f"/admin/jobs/job/{job_id}/change/")
    page.evaluate(CONFIRMED_FORM, [f"/admin/jobs/job/{job_id}/act/cancel/", question])
    posted = []
    page.on("request", lambda request: posted.append(request.url) if request.method == "POST" else None)

    page.locator("#test-form button").click()
    dialog = page.get_by_role("dialog", name="Please confirm")
    assert question in dialog.inner_text()
    assert page.evaluate("document.activeElement.textContent") == "Cancel"  # a stray Enter changes nothing
    dialog.get_by_role("button", name="Cancel").click()
    dialog.wait_for(state="hidden")
    page.locator("#test-form button").press("Enter")
    page.keyboard.press("Escape")
    dialog.wait_for(state="hidden")
    assert not posted and off_loop(lambda: Job.objects.get(job_id=job_id).status) == JobStatus.QUEUED

    page.locator("#test-form button").click()
    dialog.wait_for(state="visible")
    asked = fragment_requests(page)  # from the question on: a tick sent just before it may still go
    page.wait_for_timeout(2500)  # the page refreshes every second, but not under the question
    assert not asked
    with page.expect_navigation():
        dialog.get_by_role("button", name="Confirm").click()
    assert len(posted) == 1 and off_loop(lambda: Job.objects.get(job_id=job_id).status) == JobStatus.CANCELED


def test_without_javascript_a_data_confirm_form_still_posts(live_server, browser, rows):
    job_id = rows["job_id"]
    page = operator_page(browser, live_server.url, f"/admin/jobs/job/{job_id}/act/cancel/", java_script_enabled=False)
    page.locator("#content form[method=post] [type=submit]").first.click()  # the server's own confirmation page
    page.wait_for_load_state()
    assert off_loop(lambda: Job.objects.get(job_id=job_id).status) == JobStatus.CANCELED


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_frames_controls_and_dialogs_have_no_serious_accessibility_violation(live_server, browser, rows, theme):
    from axe_playwright_python.sync_playwright import Axe

    found = {}
    page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
    for path, open_dialog in [
        ("/admin/core/apitoken/", "?"),
        (f"/admin/jobs/job/{rows['job_id']}/change/", None),
        ("/admin/dbstates/state/", None),
        (f"/pipeline/runs/{rows['run'].id}/", None),
    ]:
        page.goto(f"{live_server.url}{path}")
        if open_dialog:
            page.keyboard.press(open_dialog)
            page.get_by_role("dialog").wait_for()
        blocking = [v for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
        if blocking:
            found[path] = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
    assert not found, found
