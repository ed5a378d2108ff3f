"""Every admin and /pipeline page people work in, checked by axe-core in headless Chromium, in
the light and the dark theme: no serious or critical violation."""

import shutil
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from ingestion.models import IngestionRun, Source
from jobs import services
from tests.conftest import ALL_DATABASES_COMMITTED

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BLOCKING = ("serious", "critical")

pytestmark = [
    ALL_DATABASES_COMMITTED,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian's chromium"),
]


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
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900}, color_scheme=theme)
            page.goto(f"{live_server.url}/admin/login/")
            page.fill("#id_username", "operator")
            page.fill("#id_password", "secret-pw")
            page.click("input[type=submit]")
            for path in pages:
                page.goto(f"{live_server.url}{path}")
                results = Axe().run(page)
                blocking = [v for v in results.response["violations"] if v["impact"] in BLOCKING]
                if blocking:
                    found[path] = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
        finally:
            browser.close()

    assert not found, "\n".join(f"{path}: {violations}" for path, violations in found.items())
