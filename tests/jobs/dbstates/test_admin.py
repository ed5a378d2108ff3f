"""The admin's pages for database states: jobs with tasks and events, the state tree, instances
with live connections, and deletion previewed by a dry run before it runs; each page read from
one snapshot."""

import psycopg

from jobs.dbstates.models import Instance, PrepareJob, State
from tests.conftest import ALL_DATABASES_COMMITTED
from tests.jobs.dbstates.helpers import prepared, writer_between_reads

pytestmark = ALL_DATABASES_COMMITTED


def test_a_job_page_shows_its_tasks_and_events(admin_client):
    job = prepared(["-c", "CREATE TABLE shown (a int)"])

    page = admin_client.get(f"/admin/dbstates/preparejob/{job.job_id}/change/").content.decode()

    assert "execute-0" in page and "prepare-instance" in page and "CREATE TABLE" in page
    assert admin_client.get("/admin/dbstates/preparejob/", {"status__exact": "succeeded"}).status_code == 200


def test_the_state_tree_draws_children_under_parents_with_their_instances(admin_client):
    base = ["-c", "CREATE TABLE base (a int)"]
    parent = prepared(base).result["state_id"]
    child_job = prepared([*base, "-c", "CREATE TABLE child (a int)"])

    page = admin_client.get("/admin/dbstates/state/tree/").content.decode()

    assert page.index(parent[:12]) < page.index(child_job.result["state_id"][:12])
    assert "└" in page and child_job.result["instance_id"][:8] in page
    assert "State tree" in admin_client.get("/admin/dbstates/state/").content.decode()


def test_the_instance_list_shows_dsn_and_live_connections(admin_client):
    job = prepared(["-c", "SELECT 1"])
    with psycopg.connect(job.result["dsn"]):
        page = admin_client.get("/admin/dbstates/instance/").content.decode()
    assert job.result["dsn"] in page
    assert '<td class="field-connections">1</td>' in page


def test_deleting_a_state_previews_the_tree_and_deletes_only_when_nothing_blocks(admin_client):
    job = prepared(["-c", "CREATE TABLE doomed (a int)"])
    state_id = job.result["state_id"]
    url = f"/admin/dbstates/state/{state_id}/delete/"

    preview = admin_client.get(url).content.decode()
    assert "blocked: has_descendants" in preview and "Yes, delete" not in preview
    refused = admin_client.post(url, {})
    assert refused.status_code == 200 and State.objects.filter(pk=state_id).exists()

    recursive = admin_client.get(url, {"recurse": "on"}).content.decode()
    assert "Yes, delete" in recursive and job.result["instance_id"] in recursive
    done = admin_client.post(url, {"recurse": "on"})

    assert done.status_code == 302 and not State.objects.exists() and not Instance.objects.exists()


def test_a_staff_user_without_delete_permission_cannot_delete(client, django_user_model):
    from django.contrib.auth.models import Permission

    job = prepared(["-c", "SELECT 1"])
    user = django_user_model.objects.create_user("viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_instance"))
    client.force_login(user)

    response = client.post(f"/admin/dbstates/instance/{job.result['instance_id']}/delete/", {})

    assert response.status_code == 403 and Instance.objects.exists()


def test_a_job_page_is_read_from_one_snapshot(admin_client):
    job = prepared(["-c", "CREATE TABLE shown (a int)"])

    gone = lambda: PrepareJob.objects.filter(pk=job.pk).delete()  # noqa: E731
    with writer_between_reads("sqlrs_prepare_jobs", gone) as ran:
        page = admin_client.get(f"/admin/dbstates/preparejob/{job.job_id}/change/").content.decode()

    assert ran and not PrepareJob.objects.exists()
    assert "execute-0" in page and "prepare-instance" in page and "CREATE TABLE" in page


def test_the_state_tree_is_read_from_one_snapshot(admin_client):
    job = prepared(["-c", "CREATE TABLE drawn (a int)"])

    gone = lambda: Instance.objects.filter(pk=job.result["instance_id"]).delete()  # noqa: E731
    with writer_between_reads("sqlrs_states", gone) as ran:
        page = admin_client.get("/admin/dbstates/state/tree/").content.decode()

    assert ran and not Instance.objects.exists()
    assert job.result["instance_id"][:8] in page
