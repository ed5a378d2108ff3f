"""The tracking admin in headless Chromium with one file of 5,000 shards: the summary and the
list stay a screen or two tall (not a bar and a filter link per shard), a shard typed into the
list's filter shows its rows and keeps the other filters, and neither page has a serious
accessibility violation in either theme."""

import pytest
from django.contrib.auth.models import User

from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium
from tests.tracking.test_admin import CHANGELIST, planted_file

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]
BLOCKING = ("serious", "critical")


@pytest.fixture
def operator(db):
    User.objects.create_superuser("operator", password="secret-pw")
    planted_file(5000)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_a_file_of_5000_shards_makes_short_pages_and_a_typed_shard_filters_the_list(live_server, operator, theme):
    from axe_playwright_python.sync_playwright import Axe

    found, heights = {}, {}
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
        for path in (f"{CHANGELIST}summary/", CHANGELIST):
            page.goto(f"{live_server.url}{path}")
            heights[path] = page.evaluate("document.documentElement.scrollHeight")
            blocking = [v for v in Axe().run(page).response["violations"] if v["impact"] in BLOCKING]
            if blocking:
                found[path] = [(v["id"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
        filter_height = page.locator("#changelist-filter").evaluate("filter => filter.scrollHeight")

        page.goto(f"{live_server.url}{CHANGELIST}?shard_worker_status__exact=started")
        page.fill("#shard-filter-value", "4320")
        page.get_by_role("button", name="Show").click()
        page.wait_for_url("**shard=4320**")
        shown = page.locator("#result_list tbody tr").all_inner_texts()
        url = page.url

    assert not found, found
    assert heights[f"{CHANGELIST}summary/"] < 2500 and heights[CHANGELIST] < 5000, heights
    assert filter_height < 2500, filter_height
    assert len(shown) == 1 and "4320" in shown[0] and "shard_worker_status__exact=started" in url
