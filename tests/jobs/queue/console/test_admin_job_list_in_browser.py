"""The job list in headless Chromium: its state tabs count and filter jobs of every state (and keys 0
to 9 choose them), scheduled rows count down to the second, the list picks up a new job live but
never while a row is checked, its rows are walked with j/k and opened with o, and it has no serious
accessibility violation in either theme, its new badges at AA."""

import re

import pytest
from django.contrib.auth.models import User

from jobs.queue.console.job_states import STATES
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.core.test_accessibility_in_browser import BLOCKING, MEASURE_CONTRAST
from tests.helpers import chromium, needs_chromium, off_loop, operator_page, wait_for
from tests.jobs.queue.console.test_job_states import MADE, make

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

AA = 4.5


@pytest.fixture
def every_state(db):
    User.objects.create_superuser("operator", password="secret-pw")
    made = {state: [make(state) for _ in range(n)] for state, n in MADE.items()}
    made["demo"] = [make("available", queue="demo-reports", task="reports.daily")]
    return made


@pytest.fixture
def browser(every_state):
    with chromium() as browser:
        yield browser


def tab_counts(page) -> dict[str, str]:
    return {
        tab.get_attribute("data-state"): tab.locator(".tab-count").inner_text()
        for tab in page.locator(".state-tabs a").all()
    }


def row_ids(page) -> list[str]:
    return page.locator("#result_list input.action-select").evaluate_all("boxes => boxes.map(b => b.value)")


def test_the_tabs_count_every_state_filter_the_list_and_answer_their_keys(live_server, browser, every_state):
    page = operator_page(browser, live_server.url, "/admin/jobs/job/?queue=q1")

    # The waiting jobs' upstream jobs run: one more running job each.
    expected = {**{state: str(n) for state, n in MADE.items()}, "running": str(MADE["running"] + MADE["waiting"])}
    assert tab_counts(page) == {"all": str(sum(MADE.values()) + MADE["waiting"]), **expected}
    assert page.locator(".state-tabs a.active").get_attribute("data-state") == "all"

    page.locator('.state-tabs a[data-state="scheduled"]').click()
    page.wait_for_url(re.compile(r"\?queue=q1&state=scheduled$"))  # loaded, not only begun
    assert sorted(row_ids(page)) == sorted(str(job_id) for job_id in every_state["scheduled"])
    countdown = page.locator("#result_list td.field-times time.countdown").first
    first = countdown.inner_text()
    assert re.fullmatch(r"in 59 min \d+ s", first), first
    page.wait_for_function(f"t => document.querySelector('td.field-times time.countdown').textContent !== {first!r}")
    assert page.locator("#result_list td.field-status_badge .status-badge").first.inner_text() == "scheduled"

    for key, state in enumerate(STATES, start=1):  # the keys, outside any field
        page.keyboard.press(str(key))
        page.wait_for_url(re.compile(rf"state={state}$"))
        ids = set(row_ids(page))
        assert ids >= {str(job_id) for job_id in every_state[state]}, state
        assert page.locator(".state-tabs a.active").get_attribute("data-state") == state
    page.keyboard.press("0")
    page.wait_for_url(re.compile(r"/admin/jobs/job/\?queue=q1$"))


def test_the_list_picks_up_a_new_job_live_but_not_while_a_row_is_checked(live_server, browser, every_state):
    page = operator_page(browser, live_server.url, "/admin/jobs/job/?state=available")
    before = row_ids(page)
    fresh = str(off_loop(make, "available", queue="q1"))

    wait_for(lambda: fresh in row_ids(page), timeout=15, what="the new job in the list")
    assert row_ids(page)[0] == fresh and set(before) < set(row_ids(page))
    assert page.locator('.state-tabs a[data-state="available"] .tab-count').inner_text() == str(len(before) + 1)

    # The refreshed rows select as the first ones did (the admin's actions bar counts them).
    page.keyboard.press("j")
    page.keyboard.press("x")
    assert page.locator(".action-counter").inner_text().startswith("1 of ")
    held = str(off_loop(make, "available", queue="q1"))
    page.wait_for_timeout(6500)  # more than a tick of the list's refresh
    assert held not in row_ids(page) and page.locator("#result_list input.action-select:checked").count() == 1
    page.keyboard.press("x")  # unchecked: it refreshes again
    wait_for(lambda: held in row_ids(page), timeout=15, what="the job held back while a row was checked")


def test_rows_are_walked_with_j_and_k_and_opened_with_o(live_server, browser, every_state):
    page = operator_page(browser, live_server.url, "/admin/jobs/job/?state=succeeded")
    ids = row_ids(page)

    for key in ("j", "j", "j", "k"):
        page.keyboard.press(key)
    current = page.locator("#result_list tr.keyboard-current input.action-select").get_attribute("value")
    assert current == ids[1]
    page.keyboard.press("o")
    page.wait_for_url(re.compile(rf"/admin/jobs/job/{ids[1]}/change/"))
    page.keyboard.press("u")  # up to the list, as it was filtered
    page.wait_for_url(re.compile(r"/admin/jobs/job/\?state=succeeded$"))


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_list_and_its_tabs_have_no_serious_violation_and_their_badges_reach_aa(live_server, browser, theme):
    from axe_playwright_python.sync_playwright import Axe

    found, measured = {}, {}
    page = operator_page(browser, live_server.url, "/admin/jobs/job/", color_scheme=theme)
    for path in ("/admin/jobs/job/", "/admin/jobs/job/?state=retryable", "/admin/jobs/job/?queue=q1&state=waiting"):
        page.goto(f"{live_server.url}{path}")
        blocking = [v["id"] for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
        if blocking:
            found[path] = blocking
        for item in page.evaluate(MEASURE_CONTRAST):
            measured[item["what"]] = min(item["ratio"], measured.get(item["what"], 99))
    assert not found, found
    for state in ("available", "scheduled", "retryable", "waiting"):
        assert any(f"status-badge.s-{state}" in what for what in measured), state
    weak = {what: round(ratio, 2) for what, ratio in measured.items() if ratio < AA}
    assert not weak, weak
    queue = page.locator("#result_list td.field-queue_name span.cell").first
    assert queue.evaluate("e => e.scrollWidth <= e.clientWidth")
