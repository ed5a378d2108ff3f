import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from jobs.queue import services
from jobs.queue.models import Job, JobEvent
from tests.conftest import ALL_DATABASES
from tests.helpers import staff_client

pytestmark = ALL_DATABASES

CHANGELIST = "/admin/jobs/job/"
DASHBOARD = "/admin/jobs/job/dashboard/"


def make_jobs(*specs: services.JobSpec) -> list[Job]:
    enqueued = services.job_enqueue_many(specs=list(specs))
    return [Job.objects.get(job_id=item.job_id) for item in enqueued]


def set_status(job: Job, status: str, **fields) -> Job:
    Job.objects.filter(job_id=job.job_id).update(status=status, **fields)
    job.refresh_from_db()
    return job


@pytest.fixture
def jobs():
    """One job per status; queues default and reports, tasks sync.pull and reports.build."""
    now = timezone.now()
    queued, running, succeeded, failed, canceled, lost = make_jobs(
        services.JobSpec(queue="default", task="sync.pull", lock_key="customer-1", idempotency_key="pull-1"),
        services.JobSpec(queue="default", task="sync.pull", lock_key="customer-2"),
        services.JobSpec(queue="default", task="sync.pull", lock_key="customer-3"),
        services.JobSpec(queue="reports", task="reports.build", lock_key="report-1"),
        services.JobSpec(queue="reports", task="reports.build", lock_key="report-2"),
        services.JobSpec(queue="reports", task="reports.build", lock_key="report-3"),
    )
    return {
        "queued": queued,
        "running": set_status(running, "running", attempt=1, started_at=now),
        "succeeded": set_status(succeeded, "succeeded", attempt=1, started_at=now, finished_at=now),
        "failed": set_status(failed, "failed", attempt=5, error="boom", started_at=now, finished_at=now),
        "canceled": set_status(canceled, "canceled", attempt=2, cancel_requested=True, finished_at=now),
        "lost": set_status(lost, "lost", attempt=5, started_at=now, finished_at=now),
    }


def listed(response) -> list[Job]:
    return list(response.context["cl"].result_list)


def message(response) -> str:
    return str(next(iter(response.context["messages"])))


def post_action(client, action, selected: list[Job], *, confirm=True, query="", **fields):
    """Choose an action for the selected jobs; then, if the admin asks, confirm it (as the page's button does)."""
    data = {"action": action, "_selected_action": [str(job.job_id) for job in selected], **fields}
    response = client.post(CHANGELIST + query, data, follow=True)
    if confirm and "action-confirmation" in response.content.decode():
        response = client.post(CHANGELIST + query, {**data, "confirmed": "yes"}, follow=True)
    return response


@pytest.fixture
def viewer(client):
    """A staff member who may look at jobs but not change them."""
    user = get_user_model().objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_job"))
    client.force_login(user)
    return client


# --- the job list ---------------------------------------------------------------------


def test_changelist_lists_newest_first_with_filters_and_a_dashboard_link(admin_client, jobs):
    response = admin_client.get(CHANGELIST)

    assert response.status_code == 200
    ids = [job.job_id for job in listed(response)]
    assert sorted(ids, reverse=True) == ids and len(ids) == 6
    html = response.content.decode()
    for state in [
        "available",
        "scheduled",
        "waiting",
        "running",
        "retryable",
        "succeeded",
        "failed",
        "canceled",
        "lost",
    ]:
        assert f'href="?state={state}"' in html  # the state tabs, in place of the status filter
    assert 'href="?queue=default"' in html and 'href="?queue=reports"' in html
    assert 'href="?task=sync.pull"' in html and 'href="?task=reports.build"' in html
    assert f'href="{DASHBOARD}"' in html
    assert "5/5" in html  # attempt/max_attempts of the failed job


def test_changelist_filters(admin_client, jobs):
    by_status = admin_client.get(CHANGELIST, {"status__exact": "failed"})
    assert listed(by_status) == [jobs["failed"]]

    by_queue_and_task = admin_client.get(CHANGELIST, {"queue": "default", "task": "sync.pull"})
    assert {job.job_id for job in listed(by_queue_and_task)} == {
        jobs[name].job_id for name in ["queued", "running", "succeeded"]
    }


@pytest.mark.parametrize(
    ("term", "expected"),
    [
        (lambda jobs: str(jobs["running"].job_id), ["running"]),
        (lambda jobs: f"  {str(jobs['running'].job_id).upper()} ", ["running"]),  # any UUID spelling, padded
        (lambda jobs: "pull-1", ["queued"]),  # idempotency_key
        (lambda jobs: "report-2", ["canceled"]),  # lock_key
        (lambda jobs: str(jobs["running"].job_id)[:8], []),  # exact matches only, no prefixes
        (lambda jobs: "customer", []),
        (lambda jobs: "not a uuid'; --", []),
    ],
)
def test_search_matches_job_id_idempotency_key_or_lock_key_exactly(admin_client, jobs, term, expected):
    response = admin_client.get(CHANGELIST, {"q": term(jobs)})

    assert response.status_code == 200
    assert listed(response) == [jobs[name] for name in expected]


def test_jobs_cannot_be_added_edited_or_deleted(admin_client, jobs):
    assert admin_client.get(f"{CHANGELIST}add/").status_code == 403
    assert admin_client.get(f"{CHANGELIST}{jobs['failed'].job_id}/delete/").status_code == 403
    html = admin_client.get(CHANGELIST).content.decode()
    assert "delete_selected" not in html

    response = admin_client.post(f"{CHANGELIST}{jobs['failed'].job_id}/change/", {"status": "queued", "attempt": "0"})

    assert response.status_code == 403
    assert Job.objects.get(job_id=jobs["failed"].job_id).status == "failed"


def test_the_job_page_shows_the_job_its_buttons_and_its_events(admin_client, jobs):
    failed = jobs["failed"]
    services.job_retry(job_id=failed.job_id, requested_by="someone")
    Job.objects.filter(job_id=failed.job_id).update(status="failed", error="ValueError: boom")

    response = admin_client.get(f"{CHANGELIST}{failed.job_id}/change/")

    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="_save"' not in html and "reports.build" in html
    assert 'id="job-status" class="status-badge s-failed"' in html and "ValueError: boom" in html
    assert ">Retry</button>" in html and ">Cancel</button>" not in html and ">Delete</button>" in html
    first, second = response.context["runs"]
    assert (first.start.event.kind, second.start.event.kind) == ("queued", "requeue")
    assert "retry_requested" in html and "someone" in html  # the requeue event's payload
    assert '<ol class="breadcrumbs">' in html and f"reports.build …{str(failed.job_id)[-8:]}" in html


def test_retry_cancel_and_delete_from_the_job_page(admin_client, jobs):
    failed, queued = jobs["failed"], jobs["queued"]

    # Not confirmed (no JavaScript asked): a page asks first, and nothing changes.
    asked = admin_client.post(f"{CHANGELIST}{failed.job_id}/act/retry/").content.decode()
    assert "Retry this job? It runs again in queue reports as run 2" in asked and 'value="Yes, retry it"' in asked
    assert Job.objects.get(job_id=failed.job_id).status == "failed"
    retried = admin_client.post(f"{CHANGELIST}{failed.job_id}/act/retry/", {"confirmed": "yes"}, follow=True)
    canceled = admin_client.post(f"{CHANGELIST}{queued.job_id}/act/cancel/", {"confirmed": "yes"}, follow=True)

    assert Job.objects.get(job_id=failed.job_id).status == "queued"
    assert "put back in its queue" in retried.content.decode()
    assert Job.objects.get(job_id=queued.job_id).status == "canceled"
    assert "canceled" in canceled.content.decode()

    confirmation = admin_client.get(f"{CHANGELIST}{queued.job_id}/act/delete/")
    assert "Yes, delete" in confirmation.content.decode() and Job.objects.filter(job_id=queued.job_id).exists()
    deleted = admin_client.post(f"{CHANGELIST}{queued.job_id}/act/delete/", {"confirmed": "yes"})
    assert deleted.status_code == 302 and not Job.objects.filter(job_id=queued.job_id).exists()
    again = admin_client.get(f"{CHANGELIST}{failed.job_id}/act/retry/").content.decode()
    assert "nothing to retry" in again  # queued now: the page says so, and offers no button


def test_a_viewer_sees_no_buttons_and_a_forged_post_is_refused(viewer, jobs):
    failed = jobs["failed"]

    html = viewer.get(f"{CHANGELIST}{failed.job_id}/change/").content.decode()

    assert ">Retry</button>" not in html and ">Delete</button>" not in html
    for action in ("retry", "cancel", "delete"):
        assert viewer.post(f"{CHANGELIST}{failed.job_id}/act/{action}/").status_code == 403
    assert viewer.post(f"{CHANGELIST}{failed.job_id}/act/explode/").status_code == 403
    assert Job.objects.get(job_id=failed.job_id).status == "failed"


def test_a_live_job_page_serves_its_body_as_a_fragment(admin_client, jobs):
    running = jobs["running"]

    fragment = admin_client.get(f"{CHANGELIST}{running.job_id}/change/", {"fragment": "1"}).content.decode()

    assert fragment.lstrip().startswith('<div data-active="true"') and "<html" not in fragment
    assert ">Cancel</button>" in fragment and ">Delete</button>" not in fragment  # a running job stays


def test_search_with_a_nul_character_is_refused(admin_client, jobs):
    response = admin_client.get(CHANGELIST, {"q": "nul\x00byte"})

    assert response.status_code == 400


# --- actions --------------------------------------------------------------------------


def test_retry_requeues_only_failed_canceled_and_lost_jobs(admin_client, jobs):
    before = {name: (job.status, job.attempt) for name, job in jobs.items()}

    response = post_action(admin_client, "retry_jobs", list(jobs.values()))

    assert message(response) == (
        "6 job(s) matched: 3 put back in their queue for a new run; 3 not failed, canceled or lost, left alone."
    )
    for name, job in jobs.items():
        attempts_before = before[name][1]
        job.refresh_from_db()
        if name in {"failed", "canceled", "lost"}:
            assert (job.status, job.attempt, job.max_attempts, job.finished_at, job.error, job.cancel_requested) == (
                "queued",
                attempts_before,  # numbered on: the next run's first attempt is attempt + 1
                attempts_before + 5,
                None,
                None,
                False,
            )
            requeue = JobEvent.objects.filter(job_id=job.job_id).order_by("event_id").last()
            assert (requeue.kind, requeue.payload["reason"], requeue.payload["by"]) == (
                "requeue",
                "retry_requested",
                "admin",
            )
        else:
            assert (job.status, job.attempt) == before[name]
            assert not JobEvent.objects.filter(job_id=job.job_id, kind="requeue").exists()


def test_cancel_cancels_queued_asks_running_to_stop_and_skips_finished(admin_client, jobs):
    selected = [jobs[name] for name in ["queued", "running", "succeeded", "canceled"]]

    response = post_action(admin_client, "cancel_jobs", selected)

    assert message(response) == (
        "4 job(s) matched: 1 queued and canceled at once; cancellation requested for 1 running; "
        "2 already finished, left alone."
    )
    queued, running, succeeded, canceled = (Job.objects.get(job_id=job.job_id) for job in selected)
    assert (queued.status, queued.cancel_requested) == ("canceled", True) and queued.finished_at is not None
    assert JobEvent.objects.get(job_id=queued.job_id, kind="canceled").payload == {"by": "admin", "while": "queued"}
    assert (running.status, running.cancel_requested) == ("running", True)
    assert (succeeded.status, succeeded.cancel_requested) == ("succeeded", False)
    assert canceled.status == "canceled"
    assert not JobEvent.objects.filter(
        job_id__in=[running.job_id, succeeded.job_id, canceled.job_id], kind="canceled"
    ).exists()


def test_actions_need_their_permissions(viewer, jobs):
    response = viewer.get(CHANGELIST)

    assert response.status_code == 200
    html = response.content.decode()
    assert "retry_jobs" not in html and "cancel_jobs" not in html

    post_action(viewer, "retry_jobs", [jobs["failed"]])
    post_action(viewer, "cancel_jobs", [jobs["queued"]])

    assert Job.objects.get(job_id=jobs["failed"].job_id).status == "failed"
    assert Job.objects.get(job_id=jobs["queued"].job_id).status == "queued"


def test_each_action_is_offered_with_its_own_permission(viewer, jobs):
    user = get_user_model().objects.get(username="viewer")
    user.user_permissions.add(Permission.objects.get(codename="change_job"))  # no action comes with it
    assert "retry_jobs" not in viewer.get(CHANGELIST).content.decode()

    user.user_permissions.add(Permission.objects.get(codename="retry_job"))
    html = viewer.get(CHANGELIST).content.decode()
    response = post_action(viewer, "retry_jobs", [jobs["failed"]])

    assert "retry_jobs" in html and "cancel_jobs" not in html and "delete_jobs" not in html
    assert message(response).startswith("1 job(s) matched: 1 put back in their queue")
    assert Job.objects.get(job_id=jobs["failed"].job_id).status == "queued"


def test_an_action_first_says_how_many_jobs_it_changes(admin_client, jobs):
    response = post_action(admin_client, "retry_jobs", list(jobs.values()), confirm=False)

    html = response.content.decode()
    assert 'id="action-confirmation"' in html
    assert "6 job(s) selected: <strong>3</strong> will be put back in their queue" in html
    assert Job.objects.filter(status="failed").count() == 1  # nothing changed yet


def test_an_action_over_all_jobs_the_filter_matches_not_just_the_page(admin_client):
    many = make_jobs(*(services.JobSpec(queue="bulk", task="t", lock_key=f"k{i}") for i in range(150)))
    Job.objects.filter(queue="bulk").update(status="failed", finished_at=timezone.now())
    make_jobs(services.JobSpec(queue="other", task="t", lock_key="other"))
    Job.objects.filter(queue="other").update(status="failed", finished_at=timezone.now())

    response = post_action(
        admin_client, "retry_jobs", many[:100], query="?queue=bulk&status__exact=failed", select_across="1"
    )

    assert message(response).startswith("150 job(s) matched: 150 put back")
    assert Job.objects.filter(queue="bulk", status="queued").count() == 150
    assert Job.objects.get(queue="other").status == "failed"


def test_delete_action_needs_the_delete_permission_and_leaves_running_jobs(admin_client, viewer, jobs):
    assert "delete_jobs" not in viewer.get(CHANGELIST).content.decode()

    response = post_action(admin_client, "delete_jobs", [jobs["succeeded"], jobs["running"]])

    assert message(response) == "2 job(s) matched: 1 deleted with their events; 1 running, left alone."
    assert not Job.objects.filter(job_id=jobs["succeeded"].job_id).exists()
    assert Job.objects.filter(job_id=jobs["running"].job_id).exists()


@pytest.mark.parametrize(
    ("term", "expected"),
    [('args:{"customer": 1}', {"queued"}), ("error:BOOM", {"failed"}), ("args:not json", set())],
)
def test_search_by_args_containment_and_error_text(admin_client, jobs, term, expected):
    Job.objects.filter(job_id=jobs["queued"].job_id).update(args={"customer": 1, "day": 2})
    Job.objects.filter(job_id=jobs["failed"].job_id).update(error="RuntimeError: boom at step 3")

    listed_ids = {job.job_id for job in listed(admin_client.get(CHANGELIST, {"q": term}))}

    assert listed_ids == {jobs[name].job_id for name in expected}


@pytest.mark.parametrize("term", ['args:{"token": "abc"}', 'args:{"db": [{"DB-Password": "x"}]}'])
def test_an_args_search_naming_a_secret_key_is_refused_unless_the_user_may_view_arguments(jobs, term):
    Job.objects.filter(job_id=jobs["queued"].job_id).update(args={"customer": 1, "token": "abc"})
    viewer = staff_client("jobs.view_job", client=Client())
    allowed = staff_client("jobs.view_job", "jobs.view_job_arguments", client=Client())

    refused = viewer.get(CHANGELIST, {"q": term})
    searched = allowed.get(CHANGELIST, {"q": term})

    assert listed(refused) == [] and "secret key" in message(refused)
    assert not list(searched.context["messages"])
    assert [job.job_id for job in listed(viewer.get(CHANGELIST, {"q": 'args:{"customer": 1}'}))] == [
        jobs["queued"].job_id
    ]
    found = [job.job_id for job in listed(allowed.get(CHANGELIST, {"q": 'args:{"token": "abc"}'}))]
    assert found == [jobs["queued"].job_id]
