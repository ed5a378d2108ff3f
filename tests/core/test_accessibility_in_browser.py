"""Every admin and /pipeline page people work in, checked in headless Chromium in the light and the
dark theme, with rows of every status on them: axe-core finds no serious or critical violation,
and every status badge and button, measured as drawn, reaches WCAG AA's 4.5:1."""

import uuid

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from ingestion.models import IngestionItem, IngestionRun, ItemStatus, RunStatus, Source
from jobs.queue import services
from jobs.queue.models import Job, JobStatus
from jobs.schedules import services as schedule_services
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.helpers import chromium, logged_in_page, needs_chromium

BLOCKING = ("serious", "critical")
AA = 4.5

pytestmark = [ALL_DATABASES_COMMITTED, needs_chromium]

# Each badge and button on the page as drawn: its text colour over its background, the
# backgrounds of its ancestors blended beneath where they are see-through; WCAG 2's ratio.
MEASURE_CONTRAST = """() => {
  const parse = text => {
    const parts = text.match(/rgba?\\(([^)]+)\\)/)[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return {r: parts[0], g: parts[1], b: parts[2], a: parts.length > 3 ? parts[3] : 1};
  };
  const over = (top, bottom) => ({
    r: top.r * top.a + bottom.r * (1 - top.a), g: top.g * top.a + bottom.g * (1 - top.a),
    b: top.b * top.a + bottom.b * (1 - top.a), a: 1,
  });
  const luminance = ({r, g, b}) => {
    const linear = v => ((v /= 255) <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
    return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
  };
  const background = element => {
    const layers = [];
    for (let e = element; e; e = e.parentElement) {
      const colour = parse(getComputedStyle(e).backgroundColor);
      if (colour.a > 0) layers.push(colour);
      if (colour.a >= 1) break;
    }
    return layers.reverse().reduce((beneath, layer) => over(layer, beneath), {r: 255, g: 255, b: 255, a: 1});
  };
  const selector = [".status-badge", ".pipeline-status", "button", ".button", "input[type=submit]",
                    "input[type=button]", "a.job-action", ".object-tools a"].join(", ");
  // What a sighted user reads: the text, less what is only there for screen readers (an icon button's label).
  const shownText = e => {
    let text = e.innerText || e.value || "";
    for (const hidden of e.querySelectorAll(".visually-hidden")) text = text.replace(hidden.innerText, "");
    return text.trim();
  };
  return [...document.querySelectorAll(selector)]
    .filter(e => e.getClientRects().length && shownText(e))
    .map(e => {
      const back = background(e), text = over(parse(getComputedStyle(e).color), back);
      const [light, dark] = [luminance(text), luminance(back)].sort((x, y) => y - x);
      return {what: `${e.tagName.toLowerCase()}.${[...e.classList].join(".")} "${shownText(e)}"`,
              ratio: (light + 0.05) / (dark + 0.05)};
    });
}"""


def job_in(status: str, **fields) -> uuid.UUID:
    """A job set straight into ``status`` (on a queue no worker serves)."""
    spec = services.JobSpec(queue="a11y", task="myproject.reports.tasks.monthly_rollup", lock_key=f"k-{uuid.uuid4()}")
    job_id = services.job_enqueue(spec=spec).job_id
    now = timezone.now()
    finished = {"finished_at": now} if status not in ("queued", "running") else {}
    started = {"started_at": now, "attempt": 1} if status != "queued" else {}
    error = {"error": "UniqueViolation: duplicate key value"} if status in ("failed", "lost") else {}
    Job.objects.filter(job_id=job_id).update(status=status, **started, **finished, **error, **fields)
    return job_id


@pytest.fixture
def pages(db):
    """The pages to check, with rows of every status in them."""
    User.objects.create_superuser("operator", password="secret-pw")
    jobs = {status: job_in(status) for status in JobStatus.values}
    jobs["cancel requested"] = job_in("running", cancel_requested=True)
    source = Source.objects.create(name="City hall", start_url="https://example.org/")
    runs = {status: IngestionRun.objects.create(source=source, status=status) for status in RunStatus.values}
    run = runs[RunStatus.FAILED]
    for status in ItemStatus.values:
        IngestionItem.objects.create(
            run=run,
            source=source,
            item_key=f"source_url:{status}",
            stage="discovery",
            item_type="source_url",
            status=status,
            error_message="timeout" if status == "failed" else None,
        )
    Job.objects.filter(job_id__in=list(jobs.values())).update(args={"run_id": str(run.id)})  # the run page's jobs
    schedule = schedule_services.schedule_create(
        values={"name": "reports.daily", "task": "reports.daily", "cron": "0 6 * * *", "timezone": "Europe/Prague"},
        by="operator",
    )
    schedule_services.schedule_run_now(schedule_id=schedule.pk, by="operator")  # a last run to link to
    return [
        "/admin/",
        "/admin/jobs/job/",
        *(f"/admin/jobs/job/{job_id}/change/" for job_id in jobs.values()),
        f"/admin/jobs/job/{jobs['failed']}/act/delete/",
        "/admin/jobs/job/dashboard/",
        "/admin/jobs/job/dashboard/?window=week",
        *(f"/admin/jobs/job/?state={state}" for state in ("available", "scheduled", "waiting", "retryable", "failed")),
        "/admin/jobs/queue/",
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
        f"/admin/ingestion/ingestionitem/?run={run.id}",
        "/admin/ingestion/source/",
        "/admin/core/apitoken/",
        "/admin/schedules/schedule/",
        f"/admin/schedules/schedule/{schedule.pk}/change/",
        "/pipeline/",
        *(f"/pipeline/runs/{run.id}/" for run in runs.values()),
    ]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_page_has_a_serious_accessibility_violation_and_every_badge_and_button_reaches_aa(live_server, pages, theme):
    from axe_playwright_python.sync_playwright import Axe

    found, weakest = {}, {}
    with chromium() as browser:
        page = logged_in_page(browser, live_server.url, username="operator", password="secret-pw", color_scheme=theme)
        for path in pages:
            page.goto(f"{live_server.url}{path}")
            results = Axe().run(page)
            blocking = [v for v in results.response["violations"] if v["impact"] in BLOCKING]
            if blocking:
                found[path] = [(v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3]) for v in blocking]
            for measured in page.evaluate(MEASURE_CONTRAST):
                if measured["ratio"] < weakest.get(measured["what"], 99):
                    weakest[measured["what"]] = measured["ratio"]
                if measured["ratio"] < AA:
                    found.setdefault(path, []).append(("contrast", measured["what"], round(measured["ratio"], 2)))

    print(f"\n{theme}: the weakest contrast of each badge and button")  # noqa: T201 - reports the figures measured
    for what, ratio in sorted(weakest.items(), key=lambda item: item[1]):
        print(f"  {ratio:5.2f}  {what}")  # noqa: T201 - reports the figures measured
    assert any("status-badge.s-succeeded" in what for what in weakest)  # the badges were there to measure
    assert any("status-badge.s-cancel-requested" in what for what in weakest)
    assert any("pipeline-status.review_required" in what for what in weakest)
    assert not found, "\n".join(f"{path}: {violations}" for path, violations in found.items())
