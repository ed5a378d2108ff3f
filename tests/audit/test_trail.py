"""Every operator action, through each door (admin, /pipeline pages, API), leaves one audit
entry naming who, what, which objects or which filter and how many, and from where; the job's,
run's and process's pages show the entries that name them."""

from contextlib import suppress

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from ingestion.models import IngestionRun, Source
from jobs.processes import services as process_services
from jobs.processes.models import Process
from jobs.queue.models import Job, Queue
from jobs.schedules import services as schedule_services
from pipeline_project.audit.models import AuditEntry
from pipeline_project.core import services as core_services
from tests.audit.helpers import only_entry
from tests.conftest import ALL_DATABASES, ALL_DATABASES_COMMITTED
from tests.helpers import scoped_client
from tests.jobs.conftest import enqueue
from tests.jobs.dbstates.helpers import prepare
from tests.jobs.processes.helpers import serving
from tests.jobs.processes.test_admin import started
from tests.jobs.queue.test_admin import CHANGELIST, jobs, post_action  # noqa: F401  (jobs: a fixture)
from tracking.models import PipelineTracking

pytestmark = ALL_DATABASES


def test_admin_actions_on_selected_jobs_record_them(admin_client, jobs):  # noqa: F811
    post_action(admin_client, "retry_jobs", [jobs["failed"], jobs["queued"]])

    entry = only_entry(actor="admin", via="admin", action="job.retry", object_type="job", count=1)
    assert sorted(entry.object_ids) == sorted([str(jobs["failed"].job_id), str(jobs["queued"].job_id)])
    assert entry.detail == {"matched": 2, "requested": 0} and entry.filter is None


def test_an_admin_action_on_every_matching_job_records_the_filter_and_the_count(admin_client, jobs):  # noqa: F811
    post_action(admin_client, "cancel_jobs", [jobs["queued"]], query="?queue=default", select_across="1")

    entry = only_entry(action="job.cancel", object_ids=[], filter={"queue": "default"})
    assert entry.count == 1 and entry.detail["requested"] == 1  # the queued one canceled, the running one asked


def test_the_job_pages_buttons_record_and_the_page_shows_the_trail(admin_client, jobs):  # noqa: F811
    job_id = jobs["failed"].job_id
    page = f"/admin/jobs/job/{job_id}/change/"
    assert "No operator has acted on it yet." in admin_client.get(page).content.decode()

    admin_client.post(f"/admin/jobs/job/{job_id}/act/retry/", {"confirmed": "yes"})  # the page asked first
    admin_client.post(f"/admin/jobs/job/{job_id}/act/cancel/", {"confirmed": "yes"})

    shown = admin_client.get(page).content.decode()
    assert [entry.action for entry in AuditEntry.objects.order_by("id")] == ["job.retry", "job.cancel"]
    assert 'data-action="job.retry"' in shown and 'data-action="job.cancel"' in shown


def test_the_dashboards_pause_resume_and_limits_record(admin_client):
    base = "/admin/jobs/job/dashboard/queues/reports"
    enqueue(task="t", queue="reports")  # the dashboard acts on the queues it lists
    admin_client.post(f"{base}/pause/")
    admin_client.post(f"{base}/resume/")
    admin_client.post(f"{base}/limits/", {"max_running": "3"})

    entries = list(AuditEntry.objects.order_by("id").values_list("action", "object_ids", "count"))
    assert entries == [
        ("queue.pause", ["reports"], 1),
        ("queue.resume", ["reports"], 1),
        ("queue.limits", ["reports"], 1),
    ]
    assert AuditEntry.objects.get(action="queue.limits").detail["max_running"] == 3


def test_deleting_jobs_in_the_admin_records_them(admin_client, jobs):  # noqa: F811
    post_action(admin_client, "delete_jobs", [jobs["succeeded"], jobs["running"]])

    entry = only_entry(action="job.delete", count=1)  # the running one is left alone
    assert entry.detail == {"matched": 2, "requested": 0} and len(entry.object_ids) == 2


def test_schedule_actions_in_the_admin_record_the_schedules_changed(admin_client):
    schedule = schedule_services.schedule_create(values={"name": "n", "task": "t", "interval_sec": 60}, by="t")
    for action in ("pause_schedules", "pause_schedules", "resume_schedules", "run_schedules_now"):
        admin_client.post("/admin/schedules/schedule/", {"action": action, "_selected_action": [schedule.pk]})

    entries = list(AuditEntry.objects.order_by("id").values_list("action", "object_ids", "count"))
    pk = str(schedule.pk)
    assert entries == [
        ("schedule.pause", [pk], 1),
        ("schedule.pause", [], 0),  # already paused: pressed, and nothing changed
        ("schedule.resume", [pk], 1),
        ("schedule.run_now", [pk], 1),
    ]


def test_the_pipeline_pages_record_start_cancel_and_retry_and_the_run_page_shows_them(admin_client):
    source = Source.objects.create(name="s", start_url="http://127.0.0.1:9/")
    admin_client.post(f"/pipeline/sources/{source.id}/run")
    run = IngestionRun.objects.get(source=source)
    admin_client.post(f"/pipeline/runs/{run.id}/retry")
    admin_client.post(f"/pipeline/runs/{run.id}/cancel")

    entries = list(AuditEntry.objects.order_by("id").values_list("via", "action", "object_type", "object_ids"))
    assert entries == [
        ("pipeline", "run.start", "run", [str(run.id)]),  # the run it started, not the source's id
        ("pipeline", "run.retry_failed", "run", [str(run.id)]),
        ("pipeline", "run.cancel", "run", [str(run.id)]),
    ]
    assert AuditEntry.objects.get(action="run.start").detail == {"source": "s", "source_id": source.id}
    shown = admin_client.get(f"/pipeline/runs/{run.id}/").content.decode()
    assert all(f'data-action="{action}"' in shown for action in ("run.start", "run.retry_failed", "run.cancel"))


def test_the_sources_admin_run_action_records(admin_client):
    source = Source.objects.create(name="s", start_url="http://127.0.0.1:9/")
    admin_client.post("/admin/ingestion/source/", {"action": "run_sources", "_selected_action": [source.id]})

    run = IngestionRun.objects.get(source=source)
    entry = only_entry(action="run.start", object_type="run", object_ids=[str(run.id)], via="admin")
    assert entry.detail == {"source": "s", "source_id": source.id}


def test_tracking_retry_records_the_rows_and_how_many_were_failed(admin_client):
    failed = PipelineTracking.objects.create(filename="f", shard=0, shard_worker_status="failed")
    fine = PipelineTracking.objects.create(filename="f", shard=1, shard_worker_status="done")
    admin_client.post(
        "/admin/tracking/pipelinetracking/",
        {"action": "retry_shard_worker", "_selected_action": [failed.pk, fine.pk]},
    )

    entry = only_entry(action="tracking.retry", count=1)
    assert sorted(entry.object_ids) == sorted([str(failed.pk), str(fine.pk)]) and entry.detail == {
        "stage": "shard-worker"
    }


def test_revoking_tokens_records(admin_client):
    token, _key = core_services.api_token_create(name="old")
    admin_client.post("/admin/core/apitoken/", {"action": "revoke_tokens", "_selected_action": [token.pk]})

    only_entry(action="token.revoke", object_ids=[str(token.pk)], count=1)


# --- the API ----------------------------------------------------------------------------------


@pytest.fixture
def operator():
    return scoped_client("read", "write", "operate")


def test_api_job_actions_record_the_token(operator, jobs):  # noqa: F811
    queued, succeeded = jobs["queued"].job_id, jobs["succeeded"].job_id
    assert operator.post(f"/api/v1/jobs/{queued}/cancel").status_code == 200
    assert operator.delete(f"/api/v1/jobs/{succeeded}").status_code == 200

    entries = list(AuditEntry.objects.order_by("id").values_list("actor", "via", "action", "object_ids"))
    actor = "token:daemon-read-write-operate"
    assert entries == [(actor, "api", "job.cancel", [str(queued)]), (actor, "api", "job.delete", [str(succeeded)])]


def test_an_api_bulk_action_records_its_filter_and_count_and_a_dry_run_nothing(operator, jobs):  # noqa: F811
    body = {"filters": {"queue": "reports"}}  # its failed, canceled and lost jobs
    assert operator.post("/api/v1/jobs/retry", {**body, "dry_run": True}, format="json").status_code == 200
    assert not AuditEntry.objects.exists()

    assert operator.post("/api/v1/jobs/retry", body, format="json").status_code == 200

    entry = only_entry(action="job.retry", object_ids=[], filter=body["filters"], count=3)
    assert entry.detail == {"matched": 3, "requested": 0}


def test_api_queue_and_schedule_actions_record(operator):
    schedule = schedule_services.schedule_create(values={"name": "n", "task": "t", "interval_sec": 60}, by="t")
    operator.post("/api/v1/queues/q/pause", {"create": True}, format="json")
    operator.put("/api/v1/queues/q/limits", {"max_running": 2}, format="json")
    operator.post("/api/v1/queues/q/resume")
    operator.post(f"/api/v1/schedules/{schedule.pk}/pause")
    operator.post(f"/api/v1/schedules/{schedule.pk}/run")

    actions = list(AuditEntry.objects.order_by("id").values_list("action", flat=True))
    assert actions == ["queue.pause", "queue.limits", "queue.resume", "schedule.pause", "schedule.run_now"]
    assert Queue.objects.get(name="q").max_running == 2


def test_a_refused_action_records_nothing(jobs):  # noqa: F811
    reader = scoped_client("read")
    staff_without_permission = Client()
    staff_without_permission.force_login(get_user_model().objects.create_user("viewer", is_staff=True))

    assert reader.post(f"/api/v1/jobs/{jobs['queued'].job_id}/cancel").status_code == 403
    assert staff_without_permission.post(f"/admin/jobs/job/{jobs['failed'].job_id}/act/retry/").status_code == 403
    assert not AuditEntry.objects.exists() and Job.objects.get(job_id=jobs["queued"].job_id).status == "queued"


def broken_process() -> str:
    with serving():
        pid = started().process_id
        with suppress(process_services.ProcessorError):
            process_services.process_call(namespace="test.scripted", process_id=pid, args={"error": "boom"})
    return pid


@ALL_DATABASES_COMMITTED
def test_a_repair_through_the_processor_records(admin_client):
    process = Process.objects.get(process_id=broken_process())
    with serving():
        admin_client.post("/admin/processes/process/", {"action": "repair_processes", "_selected_action": [process.pk]})

    only_entry(action="process.repair", object_ids=[f"test.scripted/{process.process_id}"], count=1)


@ALL_DATABASES_COMMITTED
def test_cancelling_a_prepare_job_in_the_admin_records_it(admin_client):
    job = prepare(["-c", "SELECT 1"])
    admin_client.post("/admin/dbstates/preparejob/", {"action": "cancel_jobs", "_selected_action": [job.job_id]})

    only_entry(action="prepare_job.cancel", object_ids=[job.job_id], count=1)


@ALL_DATABASES_COMMITTED
def test_process_repairs_record_and_the_process_page_shows_them(admin_client, operator):
    pid = broken_process()
    process = Process.objects.get(process_id=pid)
    admin_client.post(
        "/admin/processes/process/", {"action": "simple_repair_processes", "_selected_action": [process.pk]}
    )
    with serving(), suppress(process_services.ProcessorError):
        process_services.process_call(namespace="test.scripted", process_id=pid, args={"error": "again"})
    answer = operator.post(f"/api/v1/processes/test.scripted/{pid}/simple_repair", {}, format="json")

    assert answer.status_code == 200, answer.content
    entries = list(AuditEntry.objects.order_by("id").values_list("via", "action", "object_ids"))
    named = [f"test.scripted/{pid}"]
    assert entries == [("admin", "process.simple_repair", named), ("api", "process.simple_repair", named)]
    shown = admin_client.get(f"/admin/processes/process/{process.pk}/change/").content.decode()
    assert shown.count('data-action="process.simple_repair"') == 2
