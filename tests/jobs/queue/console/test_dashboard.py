"""The jobs dashboard: the jobs every queue finished in the chosen window (failed, canceled and lost
apart from succeeded), each queue's row as the queues page draws it, every worker; live, in one
snapshot; the pause, resume and limits buttons with their permissions, coming back to their page."""

import re
from datetime import UTC, timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.queue import selectors
from jobs.queue.models import Queue
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.jobs.queue.console.conftest import finished, queued, ran

pytestmark = ALL_DATABASES

DASHBOARD = "/admin/jobs/job/dashboard/"


def section(html: str, queue: str) -> str:
    return re.search(rf'<section class="queue[^"]*" data-queue="{queue}".*?</section>', html, re.DOTALL).group(0)


def columns(html: str, chart_id: str = "throughput-chart") -> list[dict]:
    chart = re.search(rf'<div id="{chart_id}">.*?</figure>', html, re.DOTALL).group(0)
    return [
        {"bucket": bucket, **{status: int(n) for status, n in re.findall(r'data-(\w+)="(\d+)"', attributes)}}
        for bucket, attributes in re.findall(r'<div class="bucket" data-bucket="([^"]+)"([^>]*)>', chart)
    ]


def test_the_chart_counts_each_end_apart_in_its_minute_canceled_is_not_failed(admin_client, workers):
    ran("etl", "succeeded", "succeeded", "fatal")
    five_minutes_ago = (timezone.now() - timedelta(minutes=5)).replace(second=30)
    finished("etl", "canceled", at=five_minutes_ago)
    finished("reports", "succeeded", at=timezone.now() - timedelta(hours=2))  # before the hour

    html = admin_client.get(DASHBOARD).content.decode()

    found = columns(html)
    assert len(found) == 60  # one column per minute of the hour, the current one last
    assert sum(column["succeeded"] for column in found) == 2
    assert sum(column["failed"] for column in found) == 1 and sum(column["canceled"] for column in found) == 1
    minute = five_minutes_ago.astimezone(UTC).strftime("%Y-%m-%dT%H:%MZ")
    assert next(column for column in found if column["bucket"] == minute)["canceled"] == 1
    assert "2 succeeded · 1 failed · 1 canceled · 0 lost" in html
    assert "2 succeeded · 1 failed · 1 canceled" in section(html, "etl")  # not "2 failed"
    # The y-axis' round values and unit, the x-axis' times, a table for screen readers.
    assert re.findall(r'<span class="tick" style="bottom: [\d.]+%">(\d+)</span>', html)[:3] == ["0", "1", "2"]
    assert "jobs/min" in html and re.search(r'<div class="x-axis"[^>]*><span>(\d\d:\d\d)?</span>', html)
    assert "All queues as a table" in html and '<th scope="col">canceled</th>' in html


def test_the_window_is_an_hour_a_day_or_a_week_and_the_page_keeps_it(admin_client):
    finished("etl", "succeeded", at=timezone.now() - timedelta(hours=5))

    hour, day, week = (
        admin_client.get(DASHBOARD, {"window": name}).content.decode() for name in ("hour", "day", "week")
    )

    assert (len(columns(hour)), len(columns(day)), len(columns(week))) == (60, 96, 168)
    assert sum(c["succeeded"] for c in columns(hour)) == 0 and sum(c["succeeded"] for c in columns(day)) == 1
    assert "jobs/15 min" in day and "jobs/h" in week
    assert 'aria-current="page">the last day</a>' in day
    assert admin_client.get(DASHBOARD, {"window": "year"}).status_code == 200  # unknown: the hour


def test_each_queues_row_shows_the_last_hours_times_and_refreshes_itself(admin_client):
    ran("etl", "succeeded", "succeeded", "fatal")

    html = admin_client.get(DASHBOARD).content.decode()
    fragment = admin_client.get(DASHBOARD, {"fragment": "1"}).content.decode()

    row = section(html, "etl")
    assert "2 succeeded · 1 failed" in row
    assert "run p50 0.100 s · p95 0.100 s" in row and "wait p50" in row and "in the last hour" in row
    assert 'data-refresh="?fragment=1"' in html and "setInterval(refresh" in html
    assert 'data-queue="etl"' in fragment and "<html" not in fragment  # the body only


def test_the_dashboard_lists_every_worker_alive_or_dead(admin_client, workers):
    html = admin_client.get(DASHBOARD).content.decode()

    assert f'data-worker="{workers["live"]}" data-alive="true"' in html
    assert f'data-worker="{workers["silent"]}" data-alive="false"' in html
    assert "1 alive of 2" in html


def test_without_jobs_or_workers(admin_client):
    html = admin_client.get(DASHBOARD).content.decode()

    assert "No queues yet" in html and "No workers." in html
    assert "0 succeeded · 0 failed · 0 canceled · 0 lost" in html


def test_the_dashboard_needs_staff_with_the_view_permission(client, viewer):
    assert viewer.get(DASHBOARD).status_code == 200

    client.logout()
    anonymous = client.get(DASHBOARD)
    assert anonymous.status_code == 302 and "/admin/login/" in anonymous["Location"]
    get_user_model().objects.create_user("stranger", password="pw", is_staff=True)
    client.login(username="stranger", password="pw")
    assert client.get(DASHBOARD).status_code == 403


def test_pause_and_resume_say_what_they_hold_back_and_need_the_permission(admin_client, viewer):
    queued("default", 3)
    viewer_page = viewer.get(DASHBOARD).content.decode()
    assert "Pause default" not in viewer_page
    assert viewer.post("/admin/jobs/job/dashboard/queues/default/pause/").status_code == 403

    page = admin_client.get(DASHBOARD).content.decode()
    assert (
        'data-confirm="Pause default? Its 3 queued jobs stay queued until it is resumed; its 0 running jobs finish."'
        in page
    )
    back = admin_client.post("/admin/jobs/job/dashboard/queues/default/pause/", {"next": "/admin/jobs/queue/"})
    assert back["Location"] == "/admin/jobs/queue/"
    page = admin_client.get(DASHBOARD).content.decode()

    assert selectors.queues()[0]["paused"] is True
    assert 'class="status-badge s-paused"' in page and "Resume default" in page
    assert 'data-confirm="Resume default? Workers claim its 3 queued jobs again."' in page
    elsewhere = admin_client.post("/admin/jobs/job/dashboard/queues/default/resume/", {"next": "https://evil.example/"})
    assert elsewhere["Location"] == DASHBOARD  # only back to this site
    assert not any(queue["paused"] for queue in selectors.queues())
    assert admin_client.get("/admin/jobs/job/dashboard/queues/default/pause/").status_code == 405


def test_limits_show_as_they_stand_and_their_form_opens_on_demand_filled_with_them(admin_client, viewer):
    queued("default")
    url = "/admin/jobs/job/dashboard/queues/default/limits/"
    assert viewer.post(url, {"max_running": "2"}).status_code == 403
    assert "limits: no limits" in admin_client.get(DASHBOARD).content.decode()

    admin_client.post(url, {"max_running": "2", "rate_limit": "10", "rate_period_sec": "60", "per_partition": "on"})
    row = section(admin_client.get(DASHBOARD).content.decode(), "default")

    queue = Queue.objects.get(name="default")
    assert (queue.max_running, queue.rate_limit, queue.rate_period_sec, queue.limit_per_partition) == (2, 10, 60, True)
    assert "limits: max 2 running · 10 per 60 s · per partition" in row
    assert "now 0 running, 0 started in the last 60 s" in row
    assert '<details class="queue-limits-edit"' in row and '<details class="queue-limits-edit" open' not in row
    assert 'name="max_running" min="1" value="2"' in row and 'name="rate_period_sec" min="1" value="60"' in row
    assert 'name="per_partition" checked' in row
    response = admin_client.post(url, {"max_running": "0"}, follow=True)
    assert "max_running: Must be a whole number" in response.content.decode()
    admin_client.post(url, {})
    assert Queue.objects.get(name="default").max_running is None


@ALL_DATABASES_COMMITTED
def test_the_dashboard_is_one_snapshot(admin_client, monkeypatch):
    queued("early")
    read_queues = selectors.queues

    def queues_after_an_enqueue():
        with raw_connection(autocommit=True) as writer:  # between the throughput's read and the depths'
            writer.execute(
                "INSERT INTO dl_jobs (job_id, queue, task, lock_key) VALUES (gen_random_uuid(), 'late', 't', 'l')"
            )
        return read_queues()

    monkeypatch.setattr(selectors, "queues", queues_after_an_enqueue)
    html = admin_client.get(DASHBOARD).content.decode()
    monkeypatch.setattr(selectors, "queues", read_queues)

    assert 'data-queue="early"' in html and 'data-queue="late"' not in html
    assert 'data-queue="late"' in admin_client.get(DASHBOARD).content.decode()
