"""The queues page (/admin/jobs/queue/): every queue the service has seen, whether by its jobs, its
settings, a worker serving it or the jobs it finished, each with its workers, its jobs per status,
its limits as they stand and a warning where queued jobs wait for a worker nobody runs."""

import re
import uuid
from datetime import timedelta

from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import Job, JobThroughput, Queue
from tests.conftest import ALL_DATABASES
from tests.jobs.queue.console.conftest import queued, ran

pytestmark = ALL_DATABASES

QUEUES = "/admin/jobs/queue/"


def section(html: str, queue: str) -> str:
    return re.search(rf'<section class="queue[^"]*" data-queue="{queue}".*?</section>', html, re.DOTALL).group(0)


def test_every_queue_seen_is_listed_not_only_those_with_settings(admin_client, workers):
    queued("with-jobs")
    services.queue_limits_set(queue="with-jobs", max_running=3, by="ops")
    services.worker_register(worker_id=uuid.uuid4(), hostname="h", pid=7, queues={"served-only": 2})
    ran("finished-only", "succeeded")
    Job.objects.filter(queue="finished-only").delete()  # retention took its jobs: the counts keep its finish
    services.queue_pause(queue="paused-only", by="ops", create=True)

    html = admin_client.get(QUEUES).content.decode()

    listed = re.findall(r'data-queue="([^"]+)"', html)
    assert listed == ["default", "finished-only", "paused-only", "reports", "served-only", "with-jobs"]
    assert "6 queues" in html and Queue.objects.count() == 2
    assert JobThroughput.objects.filter(queue="finished-only").exists()
    assert "1 succeeded · 0 failed" in section(html, "finished-only")


def test_a_queue_shows_its_live_workers_and_slots_and_its_jobs_per_status(admin_client, workers):
    queued("default", 2)
    ran("default", "succeeded", "canceled")

    row = section(admin_client.get(QUEUES).content.decode(), "default")

    assert "1 live worker · 4 slots" in row  # host-silent (dead) serves it too: not counted
    assert "total 4 · queued 2 · succeeded 1 · canceled 1" in row
    assert "1 succeeded · 0 failed · 1 canceled" in row
    assert "No worker serves" not in row


def test_queued_jobs_on_a_queue_no_live_worker_serves_are_a_warning(admin_client, workers):
    queued("nobody-serves")
    queued("reports", 3)
    queued("idle-elsewhere")
    Job.objects.filter(queue="idle-elsewhere").update(status="succeeded", finished_at=timezone.now())

    html = admin_client.get(QUEUES).content.decode()

    assert "No worker serves this queue: 1 job waits." in section(html, "nobody-serves")
    assert "No worker serves" not in section(html, "reports")  # host-live serves it
    assert "No worker serves" not in section(html, "idle-elsewhere")  # nothing waits
    assert "no live worker" in section(html, "idle-elsewhere")


def test_limits_read_as_they_stand(admin_client):
    queued("a")
    queued("b")
    services.queue_limits_set(queue="a", max_running=2, by="ops")
    services.queue_limits_set(queue="b", rate_limit=10, rate_period_sec=60, per_partition=True, by="ops")

    html = admin_client.get(QUEUES).content.decode()

    assert "limits: max 2 running <small>(now 0 running)</small>" in section(html, "a")
    assert "limits: 10 per 60 s · per partition" in section(html, "b")


def test_the_buttons_come_back_to_the_queues_page_in_its_window(admin_client):
    queued("default")

    row = section(admin_client.get(QUEUES, {"window": "week"}).content.decode(), "default")

    assert row.count('name="next" value="/admin/jobs/queue/?window=week"') == 2  # pause, limits
    response = admin_client.post("/admin/jobs/job/dashboard/queues/default/pause/", {"next": f"{QUEUES}?window=week"})
    assert response["Location"] == f"{QUEUES}?window=week"


def test_the_page_needs_the_queues_view_permission_and_shows_no_buttons_to_a_viewer(client, viewer):
    queued("default")

    html = viewer.get(QUEUES).content.decode()

    assert 'data-queue="default"' in html and "Pause default" not in html and "Edit limits" not in html
    client.logout()
    assert client.get(QUEUES).status_code == 302


def test_the_week_window_reads_the_kept_hours(admin_client):
    queued("default")
    three_days_ago = (timezone.now() - timedelta(days=3)).replace(minute=0, second=0, microsecond=0)
    JobThroughput.objects.create(queue="default", status="failed", minute=three_days_ago, n=7, folded=True)

    week, day = (section(admin_client.get(QUEUES, {"window": w}).content.decode(), "default") for w in ("week", "day"))

    assert "0 succeeded · 7 failed" in week and "0 succeeded · 0 failed" in day
