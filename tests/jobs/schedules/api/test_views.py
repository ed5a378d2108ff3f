"""The schedules API: create, read with the next five runs, change, pause, resume, run now,
delete; strict bodies; a bad cron expression or time zone is a 400 naming its field."""

import base64

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.test import APIClient

from jobs.queue.models import Job
from jobs.schedules.models import Schedule
from pipeline_project.web.arguments import MASK
from tests.conftest import ALL_DATABASES
from tests.helpers import scoped_client, staff_client

pytestmark = ALL_DATABASES

DAILY = {"name": "reports.daily", "task": "test.echo", "cron": "30 2 * * *", "timezone": "Europe/Prague"}


def create(api, **body):
    return api.post("/api/v1/schedules", {**DAILY, **body}, format="json")


def test_create_then_read_it_with_its_next_five_runs_in_its_time_zone(api):
    created = create(api, args={"kind": "daily"})

    assert created.status_code == 201, created.json()
    body = api.get(f"/api/v1/schedules/{created.json()['id']}").json()
    assert body["args"] == {"kind": "daily"} and body["missed_policy"] == "skip" and body["queue"] == "default"
    assert body["created_by"] == "test-daemon" and body["declared_in_code"] is False
    assert len(body["next_run_times"]) == 5
    assert all(time[11:19] in ("02:30:00", "03:00:00") for time in body["next_run_times"])  # 03:00 on a spring gap
    assert all(time.endswith(("+01:00", "+02:00")) for time in body["next_run_times"])
    assert [item["name"] for item in api.get("/api/v1/schedules").json()["results"]] == ["reports.daily"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"cron": "30 25 * * *"}, "cron"),
        ({"cron": "* * *"}, "cron"),
        ({"timezone": "Europe/Nowhere"}, "timezone"),
        ({"cron": None}, "cron"),
        ({"cron": None, "interval_sec": 0}, "interval_sec"),
        ({"priority": "1"}, "priority"),
        ({"missed_policy": "sometimes"}, "missed_policy"),
        ({"args": "not an object"}, "args"),
        ({"queue": "a queue"}, "queue"),
        ({"every": 5}, "every"),
    ],
)
def test_a_bad_body_is_a_400_naming_the_field_and_writes_nothing(api, body, field):
    response = create(api, **body)

    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "validation_error"
    assert field in response.json()["details"]
    assert not Schedule.objects.exists()


def test_a_name_taken_is_a_409_and_a_repeat_changes_nothing(api):
    assert create(api).status_code == 201
    again = create(api)
    assert again.status_code == 409 and again.json()["code"] == "name_taken"
    assert Schedule.objects.count() == 1


def test_patch_changes_only_what_it_names_and_a_new_timing_moves_the_next_run(api):
    schedule_id = create(api).json()["id"]

    response = api.patch(f"/api/v1/schedules/{schedule_id}", {"interval_sec": 5}, format="json")
    again = api.patch(f"/api/v1/schedules/{schedule_id}", {"interval_sec": 5}, format="json")

    assert response.status_code == 200, response.json()
    body = response.json()
    assert (body["cron"], body["interval_sec"], body["timezone"]) == (None, 5, "Europe/Prague")
    assert again.json()["next_run_at"] == body["next_run_at"]
    assert api.patch(f"/api/v1/schedules/{schedule_id}", {"cron": "bad"}, format="json").json()["details"].keys() == {
        "cron"
    }
    assert api.patch(f"/api/v1/schedules/{schedule_id}", {}, format="json").status_code == 400
    assert api.patch(f"/api/v1/schedules/{schedule_id}", {"task": 7}, format="json").status_code == 400


def test_pause_resume_and_run_now(api):
    schedule_id = create(api).json()["id"]
    url = f"/api/v1/schedules/{schedule_id}"

    paused = api.post(f"{url}/pause").json()
    paused_again = api.post(f"{url}/pause").json()
    run = api.post(f"{url}/run")
    resumed = api.post(f"{url}/resume").json()

    assert (paused["changed"], paused["schedule"]["paused"], paused["schedule"]["next_run_times"]) == (True, True, [])
    assert paused_again["changed"] is False
    assert run.status_code == 201 and run.json()["status"] == "queued"
    assert Job.objects.get(job_id=run.json()["job_id"]).idempotency_key.startswith(f"schedule:{schedule_id}:manual:")
    assert resumed["changed"] is True and len(resumed["schedule"]["next_run_times"]) == 5
    assert resumed["schedule"]["last_job_id"] == run.json()["job_id"]


def test_delete_then_404(api):
    schedule_id = create(api).json()["id"]
    assert api.delete(f"/api/v1/schedules/{schedule_id}").status_code == 200
    for response in (
        api.delete(f"/api/v1/schedules/{schedule_id}"),
        api.get(f"/api/v1/schedules/{schedule_id}"),
        api.post(f"/api/v1/schedules/{schedule_id}/run"),
        api.get(f"/api/v1/schedules/{2**70}"),
    ):
        assert response.status_code == 404 and response.json()["code"] == "not_found"


def test_staff_need_the_model_permissions(anonymous):
    assert anonymous.get("/api/v1/schedules").status_code == 401
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_schedule", content_type__app_label="schedules"))
    client = APIClient()
    client.force_login(viewer)
    assert client.get("/api/v1/schedules").status_code == 200
    assert client.post("/api/v1/schedules", DAILY, format="json").status_code == 403


def test_the_list_pages_by_name_and_refuses_a_tampered_cursor(api):
    for name in ("c", "a", "b"):
        create(api, name=name)

    first = api.get("/api/v1/schedules", {"limit": 2}).json()
    second = api.get(first["next"]).json()

    assert [item["name"] for item in first["results"] + second["results"]] == ["a", "b", "c"]
    assert second["next"] is None
    tampered = base64.b64encode(b"p=\x00").decode()
    answer = api.get("/api/v1/schedules", {"cursor": tampered})
    assert answer.status_code == 400 and answer.json()["code"] == "validation_error"
    misspelt = api.get("/api/v1/schedules", {"pagesize": 2})
    assert (misspelt.status_code, misspelt.json()["details"]) == (400, {"pagesize": ["Unknown field."]})


def test_a_schedules_secret_args_are_masked_unless_the_caller_may_view_arguments(api, admin_user):
    schedule_id = create(api, args={"kind": "daily", "auth": {"Password": "pw1"}}).json()["id"]
    url = f"/api/v1/schedules/{schedule_id}"
    masked = {"kind": "daily", "auth": {"Password": MASK}}
    superuser = APIClient()
    superuser.force_login(admin_user)

    def args_in(client) -> list:
        return [
            client.get(url).json()["args"],
            client.get("/api/v1/schedules").json()["results"][0]["args"],
            client.post(f"{url}/pause").json()["schedule"]["args"],  # as the operator's actions answer it
        ]

    assert args_in(scoped_client("read", "operate")) == [masked] * 3
    assert args_in(staff_client("schedules.view_schedule", "schedules.change_schedule")) == [masked] * 3
    allowed = staff_client("schedules.view_schedule", "schedules.change_schedule", "jobs.view_job_arguments")
    assert (
        args_in(allowed) == args_in(superuser) == args_in(api) == [{"kind": "daily", "auth": {"Password": "pw1"}}] * 3
    )
    assert Schedule.objects.get().args["auth"]["Password"] == "pw1"
