"""The job page and the list as answers: JSON shown as it is, times per run from
the journal, one snapshot per answer, a 404 for a job that is gone, the buttons' weight."""

import re
from datetime import timedelta

import pytest
from django.test import Client

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.db_helpers import raw_connection
from tests.helpers import staff_client

pytestmark = ALL_DATABASES_COMMITTED

CHANGELIST = "/admin/jobs/job/"


def make_job(**fields) -> Job:
    fields = {"queue": "default", "task": "reports.build", "lock_key": "k", **fields}
    return Job.objects.get(job_id=services.job_enqueue(spec=services.JobSpec(**fields)).job_id)


def page_of(job: Job) -> str:
    return f"{CHANGELIST}{job.job_id}/change/"


def section(html: str, name: str) -> str:
    return re.search(rf'<section class="job-section" id="job-{name}">(.*?)</section>', html, re.DOTALL).group(1)


def delete_from_another_connection(job_id):
    with raw_connection(autocommit=True) as writer:
        writer.execute("DELETE FROM dl_jobs WHERE job_id = %s", [job_id])


def test_empty_args_and_progress_are_json_and_a_missing_result_says_so(admin_client):
    job = make_job(args={})

    html = admin_client.get(page_of(job)).content.decode()

    assert "<pre>{}</pre>" in section(html, "args") and "<pre>{}</pre>" in section(html, "progress")
    assert "none yet" in section(html, "result") and "<pre>" not in section(html, "result")
    Job.objects.filter(job_id=job.job_id).update(status="failed", finished_at=job.created_at)
    assert "none: the job did not succeed" in section(admin_client.get(page_of(job)).content.decode(), "result")


def test_the_args_secret_values_show_only_to_users_who_may_view_arguments(admin_client):
    job = make_job(args={"source_id": 7, "db": {"db_password": "hunter2"}, "targets": [{"token": None}]})
    viewer = staff_client("jobs.view_job", client=Client())
    allowed = staff_client("jobs.view_job", "jobs.view_job_arguments", client=Client())

    for path in (page_of(job), f"{page_of(job)}?fragment=1"):
        masked = section(viewer.get(path).content.decode(), "args")
        assert "hunter2" not in masked and "null" not in masked and masked.count(MASK) == 2
        assert "source_id" in masked
        for client in (allowed, admin_client):  # the permission; a superuser has every one
            shown = section(client.get(path).content.decode(), "args")
            assert "hunter2" in shown and "null" in shown and MASK not in shown


@pytest.mark.parametrize(
    ("method", "path"),
    [("get", "change/"), ("get", "change/?fragment=1"), ("get", "act/delete/"), ("post", "act/retry/")],
)
def test_a_job_that_is_gone_is_a_404(admin_client, method, path):
    job = make_job()
    delete_from_another_connection(job.job_id)

    response = getattr(admin_client, method)(f"{CHANGELIST}{job.job_id}/{path}")

    assert response.status_code == 404


def test_the_job_page_is_one_snapshot_even_when_the_job_is_deleted_while_it_is_read(admin_client, monkeypatch):
    job = make_job()
    JobEvent.objects.create(job=job, queue=job.queue, kind="picked", payload={"attempt": 1, "worker": "w-7"})
    Job.objects.filter(job_id=job.job_id).update(status="running", attempt=1)
    from jobs.queue.console import job_page as page_module

    read_journal = page_module._journal

    def journal_after_a_delete(job_id):
        delete_from_another_connection(job_id)  # between reading the job and reading its journal
        return read_journal(job_id)

    monkeypatch.setattr(page_module, "_journal", journal_after_a_delete)
    response = admin_client.get(page_of(job))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="job-status" class="status-badge s-running"' in html and "w-7" in html  # the job and its journal
    monkeypatch.setattr(page_module, "_journal", read_journal)
    assert admin_client.get(page_of(job)).status_code == 404


def test_the_list_shows_the_latest_runs_wait_and_run_not_the_time_it_sat_failed(admin_client, monkeypatch):
    job = make_job()
    s = timedelta(seconds=1)
    for offset, kind, payload in [
        (2 * s, "picked", {"attempt": 1}),
        (3 * s, "failed", {"attempt": 1, "error": "x"}),
        (3600 * s, "requeue", {"reason": "retry_requested", "run": 2, "first_attempt": 2}),
        (3604 * s, "picked", {"attempt": 2}),
        (3606 * s, "done", {"attempt": 2}),
    ]:
        JobEvent.objects.create(job=job, queue=job.queue, kind=kind, payload=payload, ts=job.created_at + offset)
    Job.objects.filter(job_id=job.job_id).update(status="succeeded", attempt=2)
    from jobs.queue.console import admin_job_list

    read_runs = admin_job_list.latest_runs

    def runs_after_a_delete(jobs):
        delete_from_another_connection(job.job_id)  # between the list's rows and their journals
        return read_runs(jobs)

    monkeypatch.setattr(admin_job_list, "latest_runs", runs_after_a_delete)
    html = admin_client.get(CHANGELIST).content.decode()

    times = re.search(r'<td class="field-times">(.*?)</td>', html).group(1)
    assert ">4.0 s · 2.0 s<" in times  # run 2: ready at the retry, picked 4 s later, ran 2 s


def test_retry_leads_and_delete_is_the_quietest_button(admin_client):
    job = make_job()
    Job.objects.filter(job_id=job.job_id).update(status="failed", attempt=5, error="boom")

    html = admin_client.get(page_of(job)).content.decode()
    actions = re.search(r'<div class="job-actions">(.*?)</div>', html, re.DOTALL).group(1)

    assert re.findall(r'class="(job-action[^"]*)"[^>]*>(\w+)<', actions) == [
        ("job-action", "Retry"),
        ("job-action destructive", "Delete"),
    ]


def test_a_waiting_job_shows_what_it_waits_for_and_what_waits_for_it(admin_client):
    upstream = make_job(task="extract")
    middle = make_job(task="transform", lock_key="m", depends_on=[upstream.job_id])
    last = make_job(task="load", lock_key="l", depends_on=[middle.job_id], run_anyway=True)

    html = admin_client.get(page_of(middle)).content.decode()

    assert re.search(r'id="job-status" class="status-badge s-waiting"[^>]*>waiting<', html)
    waits_for = section(html, "waits-for")
    assert f'href="{page_of(upstream)}"' in waits_for and ">queued<" in waits_for and "extract" in waits_for
    needed_by = section(html, "needed-by")
    assert f'href="{page_of(last)}"' in needed_by and ">waiting<" in needed_by and "runs anyway" in needed_by
    assert 's-waiting">waiting<' in admin_client.get(CHANGELIST).content.decode()

    Job.objects.filter(job_id=upstream.job_id).update(status="failed")
    html = admin_client.get(page_of(middle)).content.decode()
    assert ">canceled<" in html and f"Upstream job {upstream.job_id} failed." in html
    assert ">failed<" in section(html, "waits-for") and 'id="job-needed-by"' in html


def test_a_job_without_dependencies_has_no_such_sections(admin_client):
    html = admin_client.get(page_of(make_job())).content.decode()
    assert 'id="job-waits-for"' not in html and 'id="job-needed-by"' not in html
