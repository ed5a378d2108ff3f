"""A process's page in headless Chromium: Repair asks first (Cancel leaves the process alone),
then repairs it through its processor and the page, refreshing itself, shows it running with the
repair in its tasks and the operator's action in its trail; a process with 10,000 events is a
page of a few thousand pixels; the page, the list and the namespaces' page have no serious
accessibility violation in either theme."""

import re
from contextlib import suppress

import pytest
from django.contrib.auth.models import User

from jobs.processes import services
from jobs.processes.console.process_page import EVENTS_SHOWN
from jobs.processes.models import Process
from pipeline_project.audit.models import AuditEntry
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop
from tests.jobs.processes.helpers import new_id, planted_process, serving

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]
BLOCKING = ("serious", "critical")
CHANGELIST = "/admin/processes/process/"


@pytest.fixture
def operator(db):
    User.objects.create_superuser("operator", password="secret-pw")


@pytest.fixture
def worker():
    with serving() as running:
        yield running


def broken() -> Process:
    """A process in error: its call's processor answered an error."""
    process_id = new_id()
    services.process_init(namespace="test.scripted", process_id=process_id, args={"events": ["hello"]})
    with suppress(services.ProcessorError):
        services.process_call(namespace="test.scripted", process_id=process_id, args={"error": "boom"})
    return Process.objects.get(process_id=process_id)


def test_repair_asks_first_then_repairs_the_process_and_the_page_shows_it_running(live_server, operator, worker):
    process = broken()
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw")
        page.goto(f"{live_server.url}{CHANGELIST}{process.pk}/change/")
        assert page.locator("#process-status").inner_text() == "error"
        assert page.locator("#process-detail").inner_text() == "boom"

        page.get_by_role("button", name="Repair", exact=True).click()
        dialog = page.get_by_role("dialog")
        question = dialog.inner_text()
        assert f"Repair process test.scripted/{process.process_id}?" in question and "1 process" in question
        dialog.get_by_role("button", name="Cancel").click()
        assert off_loop(lambda: Process.objects.get(pk=process.pk).status) == "error"  # nothing was sent

        page.get_by_role("button", name="Repair", exact=True).click()
        page.get_by_role("dialog").get_by_role("button", name="Repair").click()
        page.wait_for_load_state()
        assert "repair scheduled" in page.locator(".messagelist").inner_text()
        page.locator("#process-status").filter(has_text="running").wait_for(timeout=20_000)

        assert page.locator("#process-repairs").count() == 0  # nothing left to repair
        repair_row = page.locator("#process-task-rows tr", has_text="repair")
        assert "finished" in repair_row.inner_text()
        assert page.locator('#audit-trail tr[data-action="process.repair"]').count() == 1
    entry = off_loop(AuditEntry.objects.get)
    assert (entry.action, entry.object_ids, entry.count) == (
        "process.repair",
        [f"test.scripted/{process.process_id}"],
        1,
    )


def test_the_r_key_presses_repair_and_simple_repair_is_asked_for_too(live_server, operator):
    process = planted_process(events=3, tasks=2)
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw")
        page.goto(f"{live_server.url}{CHANGELIST}{process.pk}/change/")
        page.keyboard.press("r")
        assert "Its processor runs a repair task" in page.get_by_role("dialog").inner_text()
        page.keyboard.press("Escape")

        page.get_by_role("button", name="Simple repair").click()
        assert "back to running without its processor" in page.get_by_role("dialog").inner_text()
        page.get_by_role("dialog").get_by_role("button", name="Simple repair").click()
        page.wait_for_load_state()
        page.locator("#process-status").filter(has_text="running").wait_for()
        assert "set running" in page.locator(".messagelist").inner_text()
    assert off_loop(lambda: Process.objects.get(pk=process.pk).status) == "running"


@pytest.fixture
def pages(operator):
    """The process pages to check: one in error at 10,000 events, one waiting for its timer."""
    big = planted_process(events=10_000, tasks=3_000)
    timed_id = new_id()
    services.process_put(
        namespace="test.scripted",
        process_id=timed_id,
        process={"status": "running", "history": [{"event_id": 1, "payload": "x"}]},
        action={"set_timer": 600},
    )
    timed = Process.objects.get(process_id=timed_id)
    return [
        f"{CHANGELIST}{big.pk}/change/",
        f"{CHANGELIST}{timed.pk}/change/",
        CHANGELIST,
        f"{CHANGELIST}namespaces/",
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_process_of_10000_events_is_a_short_page_and_no_page_has_a_serious_violation(live_server, pages, theme):
    from axe_playwright_python.sync_playwright import Axe

    found = {}
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
        for path in pages:
            page.goto(f"{live_server.url}{path}")
            blocking = [v for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
            if blocking:
                found[path] = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
        page.goto(f"{live_server.url}{pages[0]}")
        height = page.evaluate("document.documentElement.scrollHeight")
        events_shown = page.locator("#process-events tr[data-event]").count()
        page.goto(f"{live_server.url}{CHANGELIST}namespaces/")
        due = page.locator("time.precise").first.inner_text()
    assert not found, found
    assert height < 5000, height
    assert events_shown == EVENTS_SHOWN
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", due), due  # a timer's time to the millisecond
