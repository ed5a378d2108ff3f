"""Schedules in the admin: the list with next and last runs, the change page with the next five
runs and the missed-tick policy, add and edit through the services' rules, the actions, and a
schedule declared in code that only pauses, resumes and runs."""

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from jobs.queue.models import Job
from jobs.schedules import services
from jobs.schedules.models import Schedule
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES
from tests.helpers import staff_client
from tests.jobs.schedules.conftest import make, utc

pytestmark = ALL_DATABASES

CHANGELIST = "/admin/schedules/schedule/"


@pytest.fixture
def admin_client(client):
    client.force_login(get_user_model().objects.create_superuser("boss", password="pw"))
    return client


def form(**values) -> dict:
    return {
        "name": "reports.daily",
        "task": "test.echo",
        "args": "{}",
        "queue": "default",
        "priority": "100",
        "lock_key": "",
        "cron": "0 6 * * *",
        "interval_sec": "",
        "timezone": "Europe/Prague",
        "missed_policy": "skip",
        "catch_up_max": "10",
        **values,
    }


def test_the_list_shows_next_and_last_runs(admin_client):
    schedule = make("every.minute", due_at=utc(2026, 1, 1))
    services.schedules_enqueue_due(now=utc(2026, 1, 1, 0, 0, 1))
    job = Job.objects.get()

    page = admin_client.get(CHANGELIST).content.decode()

    assert "every.minute" in page and "every 60 s" in page
    assert f"/admin/jobs/job/{job.job_id}/change/" in page
    assert schedule.name in page


def test_the_change_page_shows_the_next_five_runs_and_the_last_skipped(admin_client, settings):
    schedule = make("catching.up", due_at=utc(2026, 1, 1), missed_policy="once")
    services.schedules_enqueue_due(now=utc(2026, 1, 1, 1, 0, 30))

    page = admin_client.get(f"{CHANGELIST}{schedule.pk}/change/").content.decode()

    assert page.count('class="next-run"') == 5
    assert "59 skipped at 2026-01-01 01:00:30 UTC" in page
    assert 'class="last-job"' in page


def test_add_goes_through_the_rules(admin_client):
    refused = admin_client.post(f"{CHANGELIST}add/", form(cron="0 6 * *"))
    assert refused.status_code == 200 and "Use five fields" in refused.content.decode()
    assert not Schedule.objects.exists()

    added = admin_client.post(f"{CHANGELIST}add/", form())

    assert added.status_code == 302
    schedule = Schedule.objects.get()
    assert (schedule.created_by, schedule.lock_key, schedule.timezone) == ("boss", None, "Europe/Prague")
    assert schedule.next_run_at.astimezone(services.timing_of(schedule).zone()).hour == 6


def test_edit_and_the_actions(admin_client):
    schedule = make("editable", interval_sec=60)
    edited = admin_client.post(f"{CHANGELIST}{schedule.pk}/change/", form(name="editable", cron="", interval_sec="5"))
    assert edited.status_code == 302, edited.context["adminform"].form.errors
    schedule.refresh_from_db()
    assert (schedule.interval_sec, schedule.changed_by) == (5, "boss")

    for action in ("pause_schedules", "run_schedules_now"):
        admin_client.post(CHANGELIST, {"action": action, "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert schedule.paused and schedule.last_job_id == Job.objects.get().job_id
    admin_client.post(CHANGELIST, {"action": "resume_schedules", "_selected_action": [schedule.pk]})
    schedule.refresh_from_db()
    assert not schedule.paused

    admin_client.post(f"{CHANGELIST}{schedule.pk}/delete/", {"post": "yes"})
    assert not Schedule.objects.exists() and Job.objects.exists()


def test_a_schedule_declared_in_code_is_read_only_but_pauses(admin_client):
    services.schedules_declare(declared=[{"name": "coded", "task": "test.echo", "interval_sec": 60}])
    schedule = Schedule.objects.get()

    page = admin_client.get(f"{CHANGELIST}{schedule.pk}/change/").content.decode()
    admin_client.post(CHANGELIST, {"action": "pause_schedules", "_selected_action": [schedule.pk]})

    assert 'name="cron"' not in page and 'name="interval_sec"' not in page
    schedule.refresh_from_db()
    assert schedule.paused


def test_secret_args_show_masked_and_read_only_to_a_user_who_may_not_view_arguments(admin_client):
    schedule = make("with.secrets", interval_sec=60, args={"source": "crm", "api_token": "t0p"})
    editing = ("schedules.view_schedule", "schedules.change_schedule")
    viewer = staff_client(*editing, client=Client())
    allowed = staff_client(*editing, "jobs.view_job_arguments", client=Client())
    change = f"{CHANGELIST}{schedule.pk}/change/"

    masked, shown = viewer.get(change).content.decode(), allowed.get(change).content.decode()
    edited = viewer.post(change, form(name="with.secrets", cron="", interval_sec="5", args='{"api_token": "MASKED"}'))

    assert "t0p" not in masked and MASK in masked and 'name="args"' not in masked and "crm" in masked
    assert "t0p" in shown and 'name="args"' in shown and "t0p" in admin_client.get(change).content.decode()
    assert edited.status_code == 302, edited.context["adminform"].form.errors
    schedule.refresh_from_db()
    assert (schedule.interval_sec, schedule.args) == (5, {"source": "crm", "api_token": "t0p"})  # args kept

    Schedule.objects.filter(pk=schedule.pk).update(declared_in_code=True)  # read-only: shown, still masked
    assert "t0p" not in viewer.get(change).content.decode()


def test_args_without_secrets_stay_editable_for_any_editor():
    schedule = make("plain", interval_sec=60, args={"source": "crm"})
    viewer = staff_client("schedules.view_schedule", "schedules.change_schedule", client=Client())

    assert 'name="args"' in viewer.get(f"{CHANGELIST}{schedule.pk}/change/").content.decode()
