"""Every admin and /pipeline page people work in, checked by axe-core in headless Chromium, in
the light and the dark theme: no serious or critical violation."""

import pytest
from django.contrib.auth.models import User

from ingestion.models import IngestionRun, Source
from jobs import services
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import launch_chromium, logged_in_page, needs_chromium

BLOCKING = ("serious", "critical")

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]


@pytest.fixture
def pages(db):
    """The pages to check, with rows in them (a job of each kind of page, a run, a source)."""
    User.objects.create_superuser("operator", password="secret-pw")
    job = services.job_enqueue(spec=services.JobSpec(queue="default", task="reports.build", lock_key="k")).job_id
    source = Source.objects.create(name="City hall", start_url="https://example.org/")
    run = IngestionRun.objects.create(source=source)
    return [
        "/admin/",
        "/admin/jobs/job/",
        f"/admin/jobs/job/{job}/change/",
        f"/admin/jobs/job/{job}/act/delete/",
        "/admin/jobs/job/dashboard/",
        "/admin/jobs/worker/",
        "/admin/processes/process/",
        "/admin/processes/process/namespaces/",
        "/admin/tracking/pipelinetracking/",
        "/admin/tracking/pipelinetracking/summary/",
        "/admin/dbstates/preparejob/",
        "/admin/dbstates/state/",
        "/admin/dbstates/state/tree/",
        "/admin/dbstates/instance/",
        "/admin/ingestion/ingestionrun/",
        "/pipeline/",
        f"/pipeline/runs/{run.id}/",
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_page_has_a_serious_accessibility_violation(live_server, pages, theme):
    from axe_playwright_python.sync_playwright import Axe
    from playwright.sync_api import sync_playwright

    found = {}
    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        try:
            page = logged_in_page(
                browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme
            )
            for path in pages:
                page.goto(f"{live_server.url}{path}")
                results = Axe().run(page)
                blocking = [v for v in results.response["violations"] if v["impact"] in BLOCKING]
                if blocking:
                    found[path] = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
        finally:
            browser.close()

    assert not found, "\n".join(f"{path}: {violations}" for path, violations in found.items())
