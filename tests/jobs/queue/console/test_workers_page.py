"""The workers page (/admin/jobs/worker/): every registered worker, its pid whole, alive or dead,
its queues and slots, and each job it runs now with its task, queue and start, read in one
statement for the page however many workers there are."""

import re

from django.db import connection
from django.test.utils import CaptureQueriesContext

import pipeline_project
from jobs.queue import services
from jobs.queue.models import Worker
from tests.conftest import ALL_DATABASES
from tests.jobs.queue.console.conftest import live_worker_name, queued

pytestmark = ALL_DATABASES

WORKERS = "/admin/jobs/worker/"


def worker_row(html: str, hostname: str) -> str:
    return re.search(rf"<tr[^>]*>(?:(?!</tr>).)*{hostname}(?:(?!</tr>).)*</tr>", html, re.DOTALL).group(0)


def test_each_worker_with_its_state_pid_and_queues(admin_client, workers):
    response = admin_client.get(WORKERS)

    assert response.status_code == 200
    html = response.content.decode()
    live, silent = worker_row(html, "host-live"), worker_row(html, "host-silent")
    assert 'data-alive="true"' in live and '<span class="status-badge s-succeeded">alive</span>' in live
    assert '<td class="worker-pid counts">1501</td>' in live  # whole, in a cell that does not wrap
    assert '<span class="nowrap">default × 4</span>, <span class="nowrap">reports × 1</span>' in live
    assert 'data-alive="false"' in silent and "dead" in silent and '<time class="moment"' in silent
    assert "1 alive of 2 workers" in html and 'data-refresh="?fragment=1"' in html
    assert admin_client.get(f"{WORKERS}add/").status_code == 403


def test_each_worker_with_the_release_it_runs_so_a_rollout_shows_old_and_new(admin_client, workers):
    Worker.objects.filter(worker_id=workers["silent"]).update(version="")  # 0.1.0's workers did not say

    html = admin_client.get(WORKERS).content.decode()

    assert f'<td class="worker-version nowrap">{pipeline_project.__version__}</td>' in worker_row(html, "host-live")
    assert '<td class="worker-version nowrap">0.1.0 or older</td>' in worker_row(html, "host-silent")
    assert Worker.objects.get(worker_id=workers["live"]).version == pipeline_project.__version__


def test_the_jobs_a_worker_runs_now_with_their_task_queue_and_start(admin_client, workers):
    [job_id] = queued("default")
    services.jobs_claim(queue="default", limit=1, worker_id=live_worker_name(workers))

    with CaptureQueriesContext(connection) as queries:
        html = admin_client.get(WORKERS).content.decode()

    row = worker_row(html, "host-live")
    assert f'<div class="running-job" data-job="{job_id}"><a href="/admin/jobs/job/{job_id}/change/">t</a>' in row
    assert "on default, started <time" in row
    assert "none" in worker_row(html, "host-silent")
    assert sum("dl_job_events" in query["sql"] for query in queries.captured_queries) == 1


def test_a_fragment_is_the_body_only(admin_client, workers):
    fragment = admin_client.get(WORKERS, {"fragment": "1"}).content.decode()

    assert "host-live" in fragment and "<html" not in fragment
