"""Schedules in headless Chromium: the list with the next run, a schedule's page with its next
five runs, and pausing it with the list's action."""

import pytest
from django.contrib.auth.models import User

from jobs.schedules.models import Schedule
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop
from tests.jobs.schedules.conftest import make

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]


@pytest.fixture
def schedule(db):
    User.objects.create_superuser("operator", password="secret-pw")
    return make("reports.daily", cron="30 2 * * *", timezone="Europe/Prague", missed_policy="catch_up")


@pytest.fixture
def page(live_server, schedule):
    """Logged in; started after the fixtures that use the ORM (Playwright runs an event loop here)."""
    with chromium() as browser:
        yield logged_in_page(browser, live_server.url, username="operator", password="secret-pw")


def test_a_schedules_page_shows_its_next_five_runs_and_the_list_pauses_it(live_server, page, schedule):
    page.goto(f"{live_server.url}/admin/schedules/schedule/{schedule.pk}/change/")
    runs = page.locator(".next-run").all_inner_texts()
    assert len(runs) == 5
    assert all(run.startswith(("20", "19")) and (" CET " in run or " CEST " in run) for run in runs), runs
    assert page.locator("#id_missed_policy").input_value() == "catch_up"

    page.goto(f"{live_server.url}/admin/schedules/schedule/")
    row = page.locator("#result_list tbody tr").filter(has_text="reports.daily")
    assert "30 2 * * * (Europe/Prague)" in row.inner_text()
    row.locator("input.action-select").check()
    page.select_option("select[name=action]", "pause_schedules")
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_load_state()

    assert "1 of 1 schedule(s) paused." in page.locator(".messagelist").inner_text()
    assert "paused" in page.locator("#result_list tbody tr").filter(has_text="reports.daily").inner_text()
    assert off_loop(lambda: Schedule.objects.get(pk=schedule.pk).paused)
    page.goto(f"{live_server.url}/admin/schedules/schedule/{schedule.pk}/change/")
    assert "none while paused" in page.locator(".field-next_runs").inner_text()
