"""A read-only operator in headless Chromium: every page shows, no action button does, and the
action URLs (posted with the page's own session and CSRF token) and the API with a read-scoped
token answer 403 and change nothing. An operator of the other group sees the same pages with
their buttons, so what is missing is missing for the read-only operator alone."""

from contextlib import suppress

import pytest
from django.contrib.auth.models import Group, User

from ingestion.models import IngestionRun, Source
from jobs.processes import services as process_services
from jobs.queue import services
from jobs.queue.models import Job
from jobs.schedules import services as schedule_services
from pipeline_project.audit.models import AuditEntry
from pipeline_project.core import services as core_services
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium, off_loop
from tests.jobs.processes.helpers import serving
from tests.jobs.processes.test_admin import started

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

# Each page, and the buttons (role and name) an operator presses there.
PAGES = {
    "job": ("/admin/jobs/job/{job}/change/", [("button", "Retry"), ("link", "Delete")]),
    "dashboard": ("/admin/jobs/job/dashboard/", [("button", "Pause reports"), ("button", "Set limits of reports")]),
    "run": ("/pipeline/runs/{run}/", [("button", "Cancel")]),
    "runs": ("/pipeline/", [("button", "Run Site")]),
}
# The action select of each list (the admin shows it only when the user has an action).
ACTION_LISTS = ["/admin/jobs/job/", "/admin/schedules/schedule/", "/admin/processes/process/"]


@pytest.fixture
def world():
    job = services.job_enqueue(spec=services.JobSpec(queue="reports", task="t", lock_key="k"))
    Job.objects.filter(job_id=job.job_id).update(status="failed", attempt=1, error="boom")
    schedule_services.schedule_create(values={"name": "nightly", "task": "t", "interval_sec": 60}, by="t")
    run = IngestionRun.objects.create(source=Source.objects.create(name="Site", start_url="http://127.0.0.1:9/"))
    with serving(), suppress(process_services.ProcessorError):
        pid = started().process_id
        process_services.process_call(namespace="test.scripted", process_id=pid, args={"error": "boom"})
    for name, group in (("watcher", "Read-only operators"), ("fixer", "Operators")):
        User.objects.create_user(name, password="secret-pw", is_staff=True).groups.add(Group.objects.get(name=group))
    _token, read_key = core_services.api_token_create(name="dashboards", scopes=["read"])
    return {"job": job.job_id, "run": run.id, "source": run.source_id, "read_key": read_key}


@pytest.fixture
def browser(world):
    with chromium() as launched:
        yield launched


def buttons_shown(page, base_url: str, world: dict) -> dict[str, list[str]]:
    shown = {}
    for name, (path, buttons) in PAGES.items():
        answer = page.goto(base_url + path.format(**world))
        assert answer.status == 200, (name, answer.status)
        shown[name] = [label for role, label in buttons if page.get_by_role(role, name=label, exact=True).count()]
    for path in ACTION_LISTS:
        assert page.goto(base_url + path).status == 200
        shown[path] = [option for option in page.locator("select[name=action] option").all_inner_texts() if option]
    return shown


def post_as_page(page, url: str):
    """A POST with the page's session cookie and CSRF token, as its buttons would send it."""
    token = next(cookie["value"] for cookie in page.context.cookies() if cookie["name"] == "csrftoken")
    return page.request.post(url, headers={"X-CSRFToken": token, "Referer": url})


def unchanged(world: dict) -> bool:
    job, run = Job.objects.get(job_id=world["job"]), IngestionRun.objects.get(id=world["run"])
    return (job.status, run.status, AuditEntry.objects.count(), IngestionRun.objects.count()) == (
        "failed",
        "pending",
        0,
        1,
    )


def test_a_read_only_operator_sees_every_page_and_no_button(live_server, world, browser):
    fixer = logged_in_page(browser, live_server.url, username="fixer", password="secret-pw")
    watcher = logged_in_page(browser, live_server.url, username="watcher", password="secret-pw")

    for_fixer, for_watcher = (
        buttons_shown(fixer, live_server.url, world),
        buttons_shown(watcher, live_server.url, world),
    )

    assert all(for_fixer.values()), for_fixer  # the test finds the buttons where they are
    assert not any(for_watcher.values()), for_watcher


def test_a_read_only_operators_action_urls_and_read_token_answer_403(live_server, world, browser):
    page = logged_in_page(browser, live_server.url, username="watcher", password="secret-pw")
    page.goto(f"{live_server.url}/admin/jobs/job/dashboard/")  # the CSRF cookie
    base, job = live_server.url, world["job"]

    refused = {
        url: post_as_page(page, base + url).status
        for url in (
            f"/admin/jobs/job/{job}/act/retry/",
            f"/admin/jobs/job/{job}/act/delete/",
            "/admin/jobs/job/dashboard/queues/reports/pause/",
            "/admin/jobs/job/dashboard/queues/reports/limits/",
            f"/pipeline/runs/{world['run']}/cancel",
            f"/pipeline/sources/{world['source']}/run",
        )
    }
    api = page.request.post(
        f"{base}/api/v1/jobs/{job}/cancel", headers={"Authorization": f"Bearer {world['read_key']}"}
    )

    assert set(refused.values()) == {403}, refused
    assert api.status == 403 and api.json()["code"] == "permission_denied"
    assert off_loop(unchanged, world)
